// The runs API (docs/api.md) end to end: a real daemon, real runsc, a real audit log. Runs that
// are not waited for, their live event stream, cancellation (running, queued, a waiting client
// that hangs up), a follower that stops reading, ownership and auditors, kept output files and
// their names, idempotent retries and a shorter wall time. Each test checks that nothing is left
// behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "supervisor/serve/client.h"
#include "supervisor/serve/unix_socket.h"
#include "tests/serve/serve_fixture.h"
#include "tests/support/temp_dir.h"

namespace safex {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::ServeOptions;
using Clock = std::chrono::steady_clock;

json Parse(const std::string& s) { return json::parse(s, nullptr, false); }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One event of a followed stream and when its last byte arrived.
struct TimedEvent {
  json event;
  Clock::time_point at;
};

// GET /v1/runs/ID/events on a raw connection, the chunked body decoded by hand (this is what
// the API promises any HTTP/1.1 client), each event stamped with its arrival.
struct Follower {
  std::string head;
  std::vector<TimedEvent> events;
  bool ended = false;  // the last chunk arrived

  static Follower Read(const std::string& socket, const std::string& run_id,
                       std::chrono::seconds limit = std::chrono::seconds(120)) {
    Follower f;
    auto fd = serve::ConnectUnix(socket);
    if (!fd.ok()) return f;
    const std::string req = "GET /v1/runs/" + run_id + "/events HTTP/1.1\r\nHost: x\r\n\r\n";
    if (send(fd->get(), req.data(), req.size(), MSG_NOSIGNAL) != ssize_t(req.size())) return f;
    timeval tv{1, 0};
    setsockopt(fd->get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::string buf;
    bool in_body = false;
    const auto until = Clock::now() + limit;
    while (Clock::now() < until && !f.ended) {
      char chunk[4096];
      ssize_t n = recv(fd->get(), chunk, sizeof(chunk), 0);
      if (n == 0) break;
      if (n < 0) continue;  // timeout: try again until the limit
      buf.append(chunk, size_t(n));
      const auto now = Clock::now();
      if (!in_body) {
        size_t end = buf.find("\r\n\r\n");
        if (end == std::string::npos) continue;
        f.head = buf.substr(0, end);
        buf.erase(0, end + 4);
        in_body = true;
      }
      // Chunks: size CRLF data CRLF; each data is one event line.
      for (;;) {
        size_t eol = buf.find("\r\n");
        if (eol == std::string::npos) break;
        size_t size = std::stoul(buf.substr(0, eol), nullptr, 16);
        if (buf.size() < eol + 2 + size + 2) break;
        if (size == 0) {
          f.ended = true;
          break;
        }
        f.events.push_back({Parse(buf.substr(eol + 2, size)), now});
        buf.erase(0, eol + 2 + size + 2);
      }
    }
    return f;
  }

  std::string Stdout() const {
    std::string out;
    for (const auto& e : events) {
      if (e.event["type"] == "stdout") out += e.event["data"].get<std::string>();
    }
    return out;
  }
  const TimedEvent* First(const std::string& type) const {
    for (const auto& e : events) {
      if (e.event["type"] == type) return &e;
    }
    return nullptr;
  }
};

class RunsApiTest : public testing::ServeFixture {
 protected:
  // POST /v1/runs with "wait": false; the run id (empty, with a test failure, otherwise).
  std::string Start(const std::string& policy, const std::vector<std::string>& argv,
                    json extra = json::object(), std::vector<std::string> headers = {}) {
    json body = {{"policy", policy}, {"argv", argv}, {"wait", false}};
    body.update(extra);
    serve::HttpCallOptions o;
    o.headers = std::move(headers);
    auto r = serve::HttpCall(h_.socket(), "POST", "/v1/runs", body.dump(), o);
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return "";
    EXPECT_EQ(r->status, 202) << r->body;
    return Parse(r->body).value("run_id", "");
  }
  json Get(const std::string& target, int expect_status = 200) {
    auto r = h_.Call("GET", target);
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return json();
    EXPECT_EQ(r->status, expect_status) << target << ": " << r->body;
    return Parse(r->body);
  }
  // Polls GET /v1/runs/ID until the run has finished; its result.
  json WaitResult(const std::string& id, std::chrono::seconds limit = std::chrono::seconds(120)) {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      json j = Get("/v1/runs/" + id);
      if (j.value("state", "") == "finished") return j["result"];
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "run " << id << " did not finish";
    return json();
  }
  void WaitState(const std::string& id, const std::string& state) {
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < until && Get("/v1/runs/" + id).value("state", "") != state) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  audit::RunSummary AuditRun(const std::string& id) {
    for (const auto& r : h_.AuditRuns()) {
      if (r.run_id == id) return r;
    }
    ADD_FAILURE() << "run " << id << " is not in the audit log";
    return {};
  }
};

constexpr const char* kTwoLinesApart =
    "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second', flush=True)\n";

TEST_F(RunsApiTest, EventsArriveAsTheProgramWritesThem) {
  StartAndSnapshot();
  const std::string id = Start("python-untrusted", {"python3", "-c", kTwoLinesApart});
  Follower f = Follower::Read(h_.socket(), id);
  EXPECT_THAT(f.head, HasSubstr("Transfer-Encoding: chunked"));
  ASSERT_TRUE(f.ended);
  for (size_t i = 0; i < f.events.size(); ++i) EXPECT_EQ(f.events[i].event["seq"], i);
  EXPECT_EQ(f.events.front().event["state"], "queued");
  EXPECT_EQ(f.Stdout(), "first\nsecond\n");
  const TimedEvent* first = nullptr;
  for (const auto& e : f.events) {
    if (e.event["type"] == "stdout" && e.event["data"] == "first\n") first = &e;
  }
  const TimedEvent* result = f.First("result");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(result, nullptr);
  EXPECT_EQ(&f.events.back(), result);
  // The first line was not held for the end: it came while the program slept.
  EXPECT_GT(result->at - first->at, std::chrono::milliseconds(1000));
  EXPECT_EQ(result->event["result"]["verdict"], "ok");
  EXPECT_EQ(result->event["result"]["stdout"]["text"], "first\nsecond\n");
  // A second follower after the end gets the same events, from any point.
  Follower again = Follower::Read(h_.socket(), id);
  EXPECT_EQ(again.events.size(), f.events.size());
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(RunsApiTest, AStreamedSecretEndsTheRunAtOnceAndNeverLeaves) {
  StartAndSnapshot();
  const auto t0 = Clock::now();
  const std::string id =
      Start("python-untrusted", {"python3", "-c",
                                 "import time\nprint('ok', flush=True)\ntime.sleep(0.5)\n"
                                 "print('AKIA' + 'ABCDEFGHIJKLMNOP', flush=True)\n"
                                 "time.sleep(60)\n"});
  Follower f = Follower::Read(h_.socket(), id);
  ASSERT_TRUE(f.ended);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(30)) << "the run was not stopped at once";
  for (const auto& e : f.events) {
    EXPECT_EQ(e.event.dump().find("AKIAABCDEFGHIJKLMNOP"), std::string::npos) << e.event.dump();
  }
  EXPECT_EQ(f.Stdout(), "ok\n");
  json r = f.events.back().event["result"];
  EXPECT_EQ(r["verdict"], "validator-rejected");
  EXPECT_EQ(r["exit_status"], 122);
  EXPECT_THAT(r["reason"].get<std::string>(), HasSubstr("AKIA[0-9A-Z]{16}"));
  EXPECT_EQ(AuditRun(id).verdict, "validator-rejected");
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(RunsApiTest, CancelStopsARunningRunAndTakesAQueuedOneOutOfTheQueue) {
  StartAndSnapshot({.max_concurrent = 1, .max_queue = 4});
  const std::string running = Start("python-untrusted", {"sleep", "60"});
  const std::string queued = Start("python-untrusted", {"echo", "never"});
  WaitState(running, "running");
  json q = Get("/v1/runs/" + queued);
  EXPECT_EQ(q["state"], "queued");
  EXPECT_EQ(q["queue_position"], 1);

  auto del = h_.Call("DELETE", "/v1/runs/" + queued);
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(del->status, 202) << del->body;
  json qr = WaitResult(queued);
  EXPECT_EQ(qr["verdict"], "refused");
  EXPECT_THAT(qr["reason"].get<std::string>(), HasSubstr("cancelled by uid 0"));
  EXPECT_THAT(AuditRun(queued).reason, HasSubstr("before it started"));

  const auto t0 = Clock::now();
  del = h_.Call("DELETE", "/v1/runs/" + running);
  EXPECT_EQ(del->status, 202) << del->body;
  json rr = WaitResult(running);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(20));
  EXPECT_EQ(rr["verdict"], "interrupted");
  EXPECT_EQ(rr["exit_status"], 130);
  const audit::RunSummary a = AuditRun(running);
  EXPECT_EQ(a.verdict, "interrupted");
  EXPECT_THAT(a.reason, HasSubstr("cancelled by uid 0"));
  // Finished: cancelling again is a conflict, and unknown runs are 404.
  EXPECT_EQ(h_.Call("DELETE", "/v1/runs/" + running)->status, 409);
  EXPECT_EQ(h_.Call("DELETE", "/v1/runs/01a00000-0000-7000-8000-000000000000")->status, 404);
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(RunsApiTest, AWaitingClientThatHangsUpCancelsItsRun) {
  StartAndSnapshot();
  json body = {{"policy", "python-untrusted"}, {"argv", {"sleep", "60"}}};
  const std::string text = body.dump();
  auto fd = serve::ConnectUnix(h_.socket());
  ASSERT_TRUE(fd.ok());
  const std::string req = "POST /v1/runs HTTP/1.1\r\nPrefer: safex-run-id\r\nContent-Length: " +
                          std::to_string(text.size()) + "\r\n\r\n" + text;
  ASSERT_EQ(send(fd->get(), req.data(), req.size(), MSG_NOSIGNAL), ssize_t(req.size()));
  std::string interim;
  char buf[1024];
  while (interim.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = recv(fd->get(), buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    interim.append(buf, size_t(n));
  }
  const size_t at = interim.find("Safex-Run-Id: ");
  ASSERT_NE(at, std::string::npos) << interim;
  const std::string id = interim.substr(at + 14, interim.find("\r\n", at) - at - 14);
  WaitState(id, "running");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = Clock::now();
  fd->Reset();  // gone
  json r = WaitResult(id);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(20));
  EXPECT_EQ(r["verdict"], "interrupted");
  EXPECT_THAT(r["reason"].get<std::string>(), HasSubstr("went away"));
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(RunsApiTest, AFollowerThatStopsReadingBlocksNeitherTheRunNorTheService) {
  StartAndSnapshot({.request_timeout = "2s"});
  const std::string id = Start(
      "base-untrusted", {"sh", "-c",
                         "i=0; while [ $i -lt 12000 ]; do echo "
                         "line-$i-0123456789abcdef0123456789abcdef0123456789; i=$((i+1)); done"});
  // A follower with a tiny receive buffer that reads nothing.
  auto fd = serve::ConnectUnix(h_.socket());
  ASSERT_TRUE(fd.ok());
  int small = 4096;
  setsockopt(fd->get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  const std::string req = "GET /v1/runs/" + id + "/events HTTP/1.1\r\n\r\n";
  ASSERT_EQ(send(fd->get(), req.data(), req.size(), MSG_NOSIGNAL), ssize_t(req.size()));
  json r = WaitResult(id, std::chrono::seconds(60));
  EXPECT_EQ(r["verdict"], "ok") << r.dump();
  EXPECT_GT(r["stdout"]["bytes"].get<uint64_t>(), 600000u);
  // Another client is served meanwhile, and the stalled follower is cut after request_timeout.
  EXPECT_EQ(Get("/v1/health")["status"], "ok");
  EXPECT_TRUE(
      h_.WaitHealth([](const std::string& b) { return Parse(b).value("connections", -1) == 1; },
                    std::chrono::seconds(20)))
      << "the stalled follower's connection is still open";
  size_t got = 0;
  timeval tv{5, 0};
  setsockopt(fd->get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (;;) {
    char buf[65536];
    ssize_t n = recv(fd->get(), buf, sizeof(buf), 0);
    if (n <= 0) break;
    got += size_t(n);
  }
  EXPECT_LT(got, r["stdout"]["bytes"].get<uint64_t>()) << "the whole stream was buffered for it";
  fd->Reset();
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(RunsApiTest, OtherUsersSeeNothingButAuditorsOfThePolicySeeEverything) {
  StartAndSnapshot({.extra = "    allow \"base-untrusted\" { auditors = [65533] }\n"});
  const std::string id = Start("base-untrusted", {"echo", "mine"});
  WaitResult(id);
  auto as = [&](uid_t uid, const std::string& method, const std::string& target) {
    std::string resp =
        testing::RequestAs(uid, uid, h_.socket(), method + " " + target + " HTTP/1.1\r\n\r\n");
    return resp.substr(0, resp.find("\r\n"));
  };
  for (const std::string& t :
       {"/v1/runs/" + id, "/v1/runs/" + id + "/events", "/v1/runs/" + id + "/files"}) {
    EXPECT_EQ(as(65534, "GET", t), "HTTP/1.1 404 Not Found") << t;
    EXPECT_EQ(as(65533, "GET", t), "HTTP/1.1 200 OK") << t;
  }
  EXPECT_EQ(as(65534, "DELETE", "/v1/runs/" + id), "HTTP/1.1 404 Not Found");
  std::string list = testing::RequestAs(65534, 65534, h_.socket(), "GET /v1/runs HTTP/1.1\r\n\r\n");
  EXPECT_EQ(list.find(id), std::string::npos) << list;
  // An auditor runs nothing.
  json body = {{"policy", "base-untrusted"}, {"argv", {"echo", "x"}}};
  std::string post = testing::RequestAs(
      65533, 65533, h_.socket(),
      "POST /v1/runs HTTP/1.1\r\nContent-Length: " + std::to_string(body.dump().size()) +
          "\r\n\r\n" + body.dump());
  EXPECT_THAT(post, HasSubstr("HTTP/1.1 403"));
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(RunsApiTest, OutputFilesAreKeptListedFetchedAndDeliveredBySubmit) {
  StartAndSnapshot();
  const std::string id =
      Start("python-untrusted",
            {"python3", "-c", "open('/data/out/result.json', 'w').write('{\"answer\": 42}')"});
  EXPECT_EQ(WaitResult(id)["verdict"], "ok");
  json list = Get("/v1/runs/" + id + "/files");
  ASSERT_EQ(list["files"].size(), 1u) << list.dump();
  EXPECT_EQ(list["files"][0]["name"], "result.json");
  EXPECT_EQ(list["files"][0]["size"], 14);
  auto file = h_.Call("GET", "/v1/runs/" + id + "/files/result.json");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->status, 200);
  EXPECT_EQ(file->body, "{\"answer\": 42}");
  // The download is in the audit log before the bytes left: who, and what exactly.
  auto audit = h_.OpenAudit();
  ASSERT_TRUE(audit);
  auto detail = audit->GetRun(id);
  ASSERT_TRUE(detail.ok());
  ASSERT_EQ(detail->events.size(), 3u);
  EXPECT_EQ(detail->events[2].text(audit::kColKind), "access");
  EXPECT_EQ(detail->events[2].integer(audit::kColUid), 0);
  EXPECT_THAT(std::string(detail->events[2].text(audit::kColReason)),
              HasSubstr("fetched file result.json: 14 bytes, SHA-256 "));
  for (const char* bad : {"..", "../../etc/passwd", "%2e%2e/x", "a//b", "%00", "x%0a"}) {
    auto r = h_.Call("GET", "/v1/runs/" + id + "/files/" + bad);
    EXPECT_EQ(r->status, 400) << bad << ": " << r->body;
  }
  EXPECT_EQ(h_.Call("GET", "/v1/runs/" + id + "/files/other.json")->status, 404);

  testing::TempDir out;
  auto sub = h_.Submit("python-untrusted",
                       {"python3", "-c", "open('/data/out/result.json', 'w').write('{}')"},
                       {"--output", out.path()});
  EXPECT_EQ(sub.status, 0) << sub.err;
  EXPECT_EQ(ReadAll(out.Join("result.json")), "{}");
  // A second delivery into the same place would overwrite: refused, and said as such.
  auto again = h_.Submit("python-untrusted",
                         {"python3", "-c", "open('/data/out/result.json', 'w').write('[]')"},
                         {"--output", out.path()});
  EXPECT_EQ(again.status, 121) << again.err;
  EXPECT_THAT(again.err, HasSubstr("already exists"));
  EXPECT_EQ(ReadAll(out.Join("result.json")), "{}");
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(RunsApiTest, AFileLargerThanMaxDownloadIs413AndFilesOfARunStillGoingAre409) {
  StartAndSnapshot({.extra = "    max_download = 8B\n"});
  const std::string id =
      Start("python-untrusted",
            {"python3", "-c", "open('/data/out/result.json', 'w').write('{\"answer\": 42}')"});
  EXPECT_EQ(WaitResult(id)["verdict"], "ok");
  Get("/v1/runs/" + id + "/files");  // listed
  auto big = h_.Call("GET", "/v1/runs/" + id + "/files/result.json");
  EXPECT_EQ(big->status, 413) << big->body;
  EXPECT_THAT(big->body, HasSubstr("max_download"));
  const std::string going = Start("python-untrusted", {"sleep", "30"});
  EXPECT_EQ(h_.Call("GET", "/v1/runs/" + going + "/files")->status, 409);
  EXPECT_EQ(h_.Call("DELETE", "/v1/runs/" + going)->status, 202);
  WaitResult(going);
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(RunsApiTest, IdempotentRetriesAndAShorterWallTime) {
  StartAndSnapshot();
  const std::string a =
      Start("python-untrusted", {"echo", "once"}, json::object(), {"Idempotency-Key: job-7"});
  const std::string b =
      Start("python-untrusted", {"echo", "once"}, json::object(), {"Idempotency-Key: job-7"});
  EXPECT_EQ(a, b);
  serve::HttpCallOptions o;
  o.headers = {"Idempotency-Key: job-7"};
  auto other =
      serve::HttpCall(h_.socket(), "POST", "/v1/runs",
                      json{{"policy", "python-untrusted"}, {"argv", {"echo", "twice"}}}.dump(), o);
  EXPECT_EQ(other->status, 409) << other->body;
  const json normal = WaitResult(a);
  size_t runs = 0;
  for (const auto& r : h_.AuditRuns()) runs += r.run_id == a;
  EXPECT_EQ(runs, 1u);

  const std::string short_run =
      Start("python-untrusted", {"sleep", "30"}, json{{"wall_time_ms", 1000}});
  json r = WaitResult(short_run);
  EXPECT_EQ(r["verdict"], "timeout");
  EXPECT_LT(r["wall_ns"].get<uint64_t>(), 5'000'000'000u);
  // A derived plan: its own digest, recorded as such.
  EXPECT_NE(r["plan_digest"], normal["plan_digest"]);
  EXPECT_EQ(AuditRun(short_run).plan_digest, r["plan_digest"]);
  auto too_long = h_.Call(
      "POST", "/v1/runs",
      json{{"policy", "python-untrusted"}, {"argv", {"true"}}, {"wall_time_ms", 3600000}}.dump());
  EXPECT_EQ(too_long->status, 400) << too_long->body;
  EXPECT_EQ(AuditRun(Parse(too_long->body)["run_id"]).state, "refused");
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(RunsApiTest, CallersChooseOnlyWhatThePolicysCallerBlockLists) {
  StartAndSnapshot();
  h_.dir().Write("policies/agent.policy",
                 "policy \"agent\" extends \"python-untrusted\" {\n"
                 "  @override(\"TEST-1: agents pass a task id and work below /data\")\n"
                 "  caller {\n    env = [\"TASK_ID\"]\n    cwd = [\"/data\"]\n  }\n}\n");
  auto post = [&](json extra) {
    json body = {{"policy", "agent"}, {"argv", {"sh", "-c", "echo \"$TASK_ID\"; pwd"}}};
    body.update(extra);
    return h_.Call("POST", "/v1/runs", body.dump());
  };
  auto ok = post({{"env", {{"TASK_ID", "t-42"}}}, {"cwd", "/data/in"}});
  ASSERT_TRUE(ok.ok());
  json r = Parse(ok->body);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(r["verdict"], "ok") << ok->body;
  EXPECT_EQ(r["stdout"]["text"], "t-42\n/data/in\n");
  json plain = Parse(post(json::object())->body);
  EXPECT_EQ(plain["stdout"]["text"], "\n/tmp\n");     // the policy's own cwd and no TASK_ID
  EXPECT_NE(r["plan_digest"], plain["plan_digest"]);  // a derived plan, recorded as such
  EXPECT_EQ(AuditRun(r["run_id"]).plan_digest, r["plan_digest"]);
  for (const json& bad :
       {json{{"env", {{"PATH", "/tmp"}}}}, json{{"env", {{"LD_PRELOAD", "x"}}}},
        json{{"cwd", "/etc"}}, json{{"cwd", "/data/../etc"}}, json{{"cwd", "/datax"}}}) {
    auto resp = post(bad);
    EXPECT_EQ(resp->status, 400) << bad.dump() << ": " << resp->body;
    EXPECT_EQ(AuditRun(Parse(resp->body)["run_id"]).state, "refused") << bad.dump();
  }
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

// POST /v1/runs with `Accept: application/x-ndjson` answers with the run's event stream: the
// output as the program writes it (here a line 2 s before the next), the result last; `safex
// submit` prints from that stream, so its first line is out while the program still runs.
TEST_F(RunsApiTest, AStreamingPostDeliversOutputAsItComesAndSubmitPrintsIt) {
  StartAndSnapshot();
  json body = {{"policy", "base-untrusted"},
               {"argv", {"sh", "-c", "echo first; sleep 2; echo second"}}};
  std::string out;
  json result;
  Clock::time_point first_at, result_at;
  serve::HttpCallOptions call;
  call.headers = {"Accept: application/x-ndjson"};
  auto resp = serve::HttpStream(
      h_.socket(), "POST", "/v1/runs", body.dump(),
      [&](std::string_view line) {
        json ev = Parse(std::string(line));
        if (ev["type"] == "stdout") {
          if (out.empty()) first_at = Clock::now();
          out += ev["data"].get<std::string>();
        } else if (ev["type"] == "result") {
          result_at = Clock::now();
          result = ev["result"];
        }
      },
      call);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 200);
  EXPECT_TRUE(resp->complete);
  EXPECT_FALSE(resp->run_id.empty());
  EXPECT_EQ(out, "first\nsecond\n");
  EXPECT_EQ(result["verdict"], "ok") << result.dump();
  EXPECT_EQ(result["run_id"], resp->run_id);
  EXPECT_GT(result_at - first_at, std::chrono::milliseconds(1500)) << "the first line came late";

  // `safex submit`: the first line on its stdout while the program sleeps.
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnOptions o;
  o.argv = {testing::SafexBinary(), "submit", "--socket", h_.socket(), "--policy",
            "base-untrusted", "--", "sh", "-c", "echo first; sleep 3; echo second"};
  o.fds = {{0, devnull.get()}, {1, write_end.get()}, {2, devnull.get()}};
  auto submit = Subprocess::Spawn(o);
  ASSERT_TRUE(submit.ok()) << submit.status().ToString();
  write_end.Reset();
  std::string printed;
  char buf[256];
  while (printed.find('\n') == std::string::npos) {
    ssize_t n = read(read_end.get(), buf, sizeof(buf));
    if (n <= 0) break;
    printed.append(buf, size_t(n));
  }
  EXPECT_EQ(printed, "first\n");
  EXPECT_FALSE(submit->Wait(Clock::now()).value().has_value())
      << "safex submit ended before the program's second line";
  for (ssize_t n; (n = read(read_end.get(), buf, sizeof(buf))) > 0;) printed.append(buf, size_t(n));
  auto ended = submit->Wait(Clock::now() + std::chrono::seconds(60));
  ASSERT_TRUE(ended.ok() && ended->has_value());
  EXPECT_TRUE((*ended)->exited && (*ended)->code == 0);
  EXPECT_EQ(printed, "first\nsecond\n");
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  ExpectNoLeaks();
}

// A streaming POST's client that goes away cancels its run, as a waiting one's does.
TEST_F(RunsApiTest, AStreamingClientThatHangsUpCancelsItsRun) {
  StartAndSnapshot();
  json body = {{"policy", "python-untrusted"}, {"argv", {"sleep", "60"}}};
  const std::string text = body.dump();
  auto fd = serve::ConnectUnix(h_.socket());
  ASSERT_TRUE(fd.ok());
  const std::string req =
      "POST /v1/runs HTTP/1.1\r\nAccept: application/x-ndjson\r\nContent-Length: " +
      std::to_string(text.size()) + "\r\n\r\n" + text;
  ASSERT_EQ(send(fd->get(), req.data(), req.size(), MSG_NOSIGNAL), ssize_t(req.size()));
  std::string head;
  char buf[1024];
  while (head.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = recv(fd->get(), buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    head.append(buf, size_t(n));
  }
  EXPECT_THAT(head, HasSubstr("Transfer-Encoding: chunked"));
  const size_t at = head.find("Safex-Run-Id: ");
  ASSERT_NE(at, std::string::npos) << head;
  const std::string id = head.substr(at + 14, head.find("\r\n", at) - at - 14);
  WaitState(id, "running");
  fd->Reset();  // gone
  json r = WaitResult(id);
  EXPECT_EQ(r["verdict"], "interrupted");
  EXPECT_THAT(r["reason"].get<std::string>(), HasSubstr("went away"));
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

}  // namespace
}  // namespace safex
