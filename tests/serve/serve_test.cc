// `safex serve` end to end: a real daemon (the built binary) on a temp socket with real runsc
// and a real audit log, driven by `safex submit` and raw HTTP. Each test checks that nothing is
// left behind (sandboxes, cgroups, state, run records).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "supervisor/serve/unix_socket.h"
#include "tests/serve/serve_fixture.h"
#include "tests/serve/serve_harness.h"
#include "tests/support/leak_check.h"
#include "tests/support/run_process.h"
#include "tests/support/test_support.h"

namespace safex {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::ProcessOutput;
using testing::ServeHarness;
using testing::ServeOptions;
using Clock = std::chrono::steady_clock;

json Parse(const std::string& s) { return json::parse(s, nullptr, false); }

// Whether a /v1/health body shows these counts (-1: any). A body that is not a JSON object (it
// never should be) is "no", not an exception.
bool HealthShows(const std::string& body, int in_flight, int queued) {
  json j = Parse(body);
  if (!j.is_object()) return false;
  return (in_flight < 0 || j.value("in_flight", -1) == in_flight) &&
         (queued < 0 || j.value("queued", -1) == queued);
}

std::string PostRun(const std::string& policy, const std::vector<std::string>& argv) {
  return json{{"policy", policy}, {"argv", argv}}.dump();
}

class ServeTest : public testing::ServeFixture {};

TEST_F(ServeTest, HealthMetricsAndClearErrorsForBadRequests) {
  StartAndSnapshot({.request_timeout = "1s", .max_request = "64KiB"});
  auto health = h_.Call("GET", "/v1/health");
  ASSERT_TRUE(health.ok()) << health.status().message();
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(Parse(health->body)["status"], "ok");

  auto metrics = h_.Call("GET", "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->body, HasSubstr("# TYPE safex_run_duration_seconds histogram"));
  EXPECT_THAT(metrics->body, HasSubstr("safex_runs_finished_total{verdict=\"ok\"} 0"));

  EXPECT_EQ(h_.Call("GET", "/v2/nothing")->status, 404);
  EXPECT_EQ(h_.Call("DELETE", "/v1/runs")->status, 405);
  EXPECT_EQ(h_.Call("GET", "/v1/runs/not-a-run")->status, 404);

  struct Bad {
    std::string body;
    int status;
  };
  std::string big_argv =
      json{{"policy", "python-untrusted"}, {"argv", std::vector<std::string>(5000, "x")}}.dump();
  const Bad bad[] = {
      {"{not json", 400},
      {R"({"policy":"python-untrusted","argv":["true"],"colour":"red"})", 400},
      {"{\"policy\":\"python-untrusted\",\"argv\":[\"\xff\xfe\"]}", 400},
      {R"({"policy":"../../etc/shadow","argv":["true"]})", 400},
      {R"({"policy":"python-untrusted","argv":[]})", 400},
      {big_argv, 413},  // larger than max_argv (and the 64 KiB body cap catches bigger ones)
      {std::string(70000, ' '), 413},
  };
  for (const Bad& b : bad) {
    auto r = h_.Call("POST", "/v1/runs", b.body);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->status, b.status) << b.body.substr(0, 80) << " -> " << r->body;
    json j = Parse(r->body);
    ASSERT_FALSE(j.is_discarded()) << r->body;
    EXPECT_EQ(j["verdict"], "refused");
    EXPECT_EQ(j["exit_status"], 125);
  }

  // HTTP-level problems: no Content-Length, chunked, a huge head, garbage.
  EXPECT_THAT(h_.Raw("POST /v1/runs HTTP/1.1\r\nHost: x\r\n\r\n"), HasSubstr("HTTP/1.1 411"));
  EXPECT_THAT(h_.Raw("POST /v1/runs HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
              HasSubstr("HTTP/1.1 411"));
  EXPECT_THAT(h_.Raw("GET / HTTP/1.1\r\nX: " + std::string(40000, 'a') + "\r\n\r\n"),
              HasSubstr("HTTP/1.1 431"));
  EXPECT_THAT(h_.Raw(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15)),
              HasSubstr("HTTP/1.1 400"));
  // Half-closed client: the whole request, then shutdown(SHUT_WR): still answered.
  EXPECT_THAT(h_.Raw("GET /v1/health HTTP/1.1\r\n\r\n", /*half_close=*/true),
              HasSubstr("HTTP/1.1 200"));
  // A client that stops mid-request (EOF) gets 400; one that stalls gets 408 at the timeout.
  EXPECT_THAT(h_.Raw("POST /v1/runs HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"po"),
              HasSubstr("HTTP/1.1 400"));
  auto t0 = Clock::now();
  EXPECT_THAT(h_.Raw("POST /v1/runs HTTP/1.1\r\nContent-Len", /*half_close=*/false),
              HasSubstr("HTTP/1.1 408"));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));

  // Slowloris: many connections trickling bytes do not stop the service from answering.
  std::vector<UniqueFd> slow;
  for (int i = 0; i < 20; ++i) {
    auto fd = serve::ConnectUnix(h_.socket());
    ASSERT_TRUE(fd.ok());
    send(fd->get(), "GET /v1/hea", 11, MSG_NOSIGNAL);
    slow.push_back(std::move(fd).value());
  }
  auto during = h_.Call("GET", "/v1/health");
  ASSERT_TRUE(during.ok());
  EXPECT_EQ(during->status, 200);
  slow.clear();

  // Parse failures of run requests are audited as refusals.
  auto runs = h_.AuditRuns();
  int refused = 0;
  for (const auto& r : runs) refused += r.state == "refused";
  EXPECT_GE(refused, 6);
  EXPECT_TRUE(h_.running());
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(ServeTest, FiftySubmissionsFromEightClientsAllCorrectAndAudited) {
  StartAndSnapshot({.max_concurrent = 4, .max_queue = 16});
  constexpr int kRuns = 50;
  constexpr int kClients = 8;
  std::atomic<int> next{0};
  std::vector<ProcessOutput> results(kRuns);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i = next++; i < kRuns; i = next++) {
        results[i] =
            h_.Submit("python-untrusted",
                      {"/bin/echo", "run", std::to_string(i), std::to_string(i * i)}, {"--json"});
      }
    });
  }
  for (auto& t : clients) t.join();
  std::set<std::string> ids;
  for (int i = 0; i < kRuns; ++i) {
    const ProcessOutput& r = results[i];
    EXPECT_EQ(r.status, 0) << i << ": " << r.out << r.err;
    json j = Parse(r.out);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j["verdict"], "ok");
    EXPECT_EQ(j["stdout"]["text"], "run " + std::to_string(i) + " " + std::to_string(i * i) + "\n");
    ids.insert(j["run_id"].get<std::string>());
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kRuns));
  // Every one is in the audit log, finished, ok, with the caller's uid.
  auto runs = h_.AuditRuns();
  int audited = 0;
  for (const auto& r : runs) {
    if (ids.count(r.run_id) == 0) continue;
    ++audited;
    EXPECT_EQ(r.state, "finished");
    EXPECT_EQ(r.verdict, "ok");
    ASSERT_TRUE(r.requester.uid.has_value());
    EXPECT_EQ(*r.requester.uid, 0u);
    EXPECT_EQ(r.policy_name, "python-untrusted");
  }
  EXPECT_EQ(audited, kRuns);
  auto log = h_.OpenAudit();
  ASSERT_NE(log, nullptr);
  auto verify = log->Verify();
  ASSERT_TRUE(verify.ok());
  EXPECT_TRUE(verify->ok) << verify->problem;
  auto metrics = h_.Call("GET", "/metrics");
  EXPECT_THAT(metrics->body, HasSubstr("safex_runs_finished_total{verdict=\"ok\"} 50"));
  EXPECT_THAT(metrics->body, HasSubstr("safex_policy_compilations_total 1\n"));
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

// Fork, drop to uid/gid 65534 (nothing privileged is open), connect, send, read the answer.
std::string RequestAsNobody(const std::string& socket, const std::string& request) {
  return testing::RequestAs(65534, 65534, socket, request);
}

TEST_F(ServeTest, CallerWhoseUidIsNotAllowedIsRefusedAndAudited) {
  StartAndSnapshot();
  std::string body = PostRun("python-untrusted", {"/bin/echo", "hi"});
  std::string req = "POST /v1/runs HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\n\r\n" + body;
  std::string resp = RequestAsNobody(h_.socket(), req);
  ASSERT_THAT(resp, HasSubstr("HTTP/1.1 403")) << resp;
  json j = Parse(resp.substr(resp.find("\r\n\r\n") + 4));
  EXPECT_EQ(j["verdict"], "refused");
  EXPECT_EQ(j["exit_status"], 125);
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("uid 65534 may not use policy"));
  // The same uid may use the one policy a rule names for it (authorisation is per policy).
  std::string body2 = PostRun("base-untrusted", {"/bin/echo", "hi"});
  std::string resp2 = RequestAsNobody(
      h_.socket(), "POST /v1/runs HTTP/1.1\r\nContent-Length: " + std::to_string(body2.size()) +
                       "\r\n\r\n" + body2);
  ASSERT_THAT(resp2, HasSubstr("HTTP/1.1 200")) << resp2;
  EXPECT_EQ(Parse(resp2.substr(resp2.find("\r\n\r\n") + 4))["stdout"]["text"], "hi\n");

  bool found = false;
  for (const auto& r : h_.AuditRuns()) {
    if (r.run_id == j["run_id"]) {
      found = true;
      EXPECT_EQ(r.state, "refused");
      ASSERT_TRUE(r.requester.uid.has_value());
      EXPECT_EQ(*r.requester.uid, 65534u);
      EXPECT_EQ(r.policy_name, "python-untrusted");
      EXPECT_THAT(r.reason, HasSubstr("may not use policy"));
    }
  }
  EXPECT_TRUE(found) << "the refusal is not in the audit log";
  // Another user's run is not visible to uid 65534.
  std::string own = Parse(resp2.substr(resp2.find("\r\n\r\n") + 4))["run_id"];
  auto as_root = h_.Call("GET", "/v1/runs/" + own);
  EXPECT_EQ(as_root->status, 200);
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

// "At once" is checked against the service's own state, not only against a clock: the refusal
// must come back while the one worker is still busy with the slow run and the queued request is
// still waiting (health says so after the answer, and the audit log holds the refusal before the
// slow run's end event). The slow run sleeps much longer than any refusal may take, so a cold
// runsc, a loaded machine or a slow first fsync of the audit log cannot make the run end first.
TEST_F(ServeTest, FullQueueRefusesAtOnce) {
  StartAndSnapshot({.max_concurrent = 1, .max_queue = 1});
  // /bin/sleep rather than python: the run must end within the policy's 10 s wall time however
  // slow the sandbox's start is, and stay busy far longer than a refusal takes.
  const std::vector<std::string> slow = {"/bin/sleep", "5"};
  auto a = std::async(std::launch::async,
                      [&] { return h_.Submit("python-untrusted", slow, {"--json"}); });
  ASSERT_TRUE(h_.WaitHealth([](const std::string& b) { return HealthShows(b, 1, 0); })) << h_.log();
  auto b = std::async(std::launch::async, [&] {
    return h_.Submit("python-untrusted", {"/bin/echo", "queued"}, {"--json"});
  });
  ASSERT_TRUE(h_.WaitHealth([](const std::string& b) { return HealthShows(b, 1, 1); })) << h_.log();
  auto t0 = Clock::now();
  ProcessOutput c = h_.Submit("python-untrusted", {"/bin/echo", "third"}, {"--json"});
  auto took = Clock::now() - t0;
  // Still full after the answer: the refusal did not wait for capacity.
  auto after = h_.Call("GET", "/v1/health");
  ASSERT_TRUE(after.ok());
  json state = Parse(after->body);
  EXPECT_EQ(state["in_flight"], 1) << after->body;
  EXPECT_EQ(state["queued"], 1) << after->body;
  EXPECT_EQ(c.status, 125) << c.out << c.err;
  // And promptly: the time includes starting the `safex submit` process and an fsync'ed audit
  // commit (measured 12-76 ms with a load average of 14-21 on 2 CPUs, and with cold caches).
  EXPECT_LT(took, std::chrono::seconds(2)) << "the refusal must not wait";
  std::cout << "refusal answered in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  json j = Parse(c.out);
  ASSERT_FALSE(j.is_discarded()) << c.out;
  EXPECT_EQ(j["error"]["status"], 503);
  EXPECT_EQ(j["verdict"], "refused");
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("at capacity"));

  ProcessOutput ra = a.get();
  ProcessOutput rb = b.get();
  EXPECT_EQ(ra.status, 0) << ra.out << ra.err << h_.log();
  EXPECT_EQ(rb.status, 0) << rb.out << rb.err << h_.log();
  EXPECT_EQ(Parse(rb.out)["stdout"]["text"], "queued\n") << rb.out;
  std::string slow_id = Parse(ra.out).value("run_id", "");
  std::optional<int64_t> refused_seq, slow_end_seq;
  for (const auto& r : h_.AuditRuns()) {
    if (r.run_id == j["run_id"] && r.state == "refused") refused_seq = r.start_seq;
    if (r.run_id == slow_id) slow_end_seq = r.end_seq;
  }
  ASSERT_TRUE(refused_seq.has_value()) << "the refusal is not audited as refused";
  ASSERT_TRUE(slow_end_seq.has_value()) << "the slow run has no end event";
  EXPECT_LT(*refused_seq, *slow_end_seq) << "refused only after the slow run ended";
  auto metrics = h_.Call("GET", "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(metrics->body, HasSubstr("safex_requests_refused_total{reason=\"busy\"} 1\n"));
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(ServeTest, SigkillDuringRunsThenRestartLeavesNothingAndRecordsEachLostRun) {
  // Baseline before the first daemon: the restarted one must leave exactly this behind.
  std::filesystem::create_directories(h_.state_dir());
  ASSERT_EQ(h_.Start({.max_concurrent = 3}), "");
  before_ = testing::LeakSnapshot::Take(LeakOptions());
  std::vector<std::future<ProcessOutput>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::async(std::launch::async, [&] {
      return h_.Submit("python-untrusted", {"python3", "-c", "import time; time.sleep(8)"});
    }));
  }
  // Wait until all three have a committed start event (the sandboxes are being made or run).
  std::set<std::string> lost;
  auto until = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < until) {
    lost.clear();
    for (const auto& r : h_.AuditRuns()) {
      if (r.state == "running") lost.insert(r.run_id);
    }
    if (lost.size() == 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(lost.size(), 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // sandboxes are up
  h_.Kill();
  // The connection died after admission: the outcome is unknown (never "refused": they ran),
  // and the client names the run it was admitted as.
  for (auto& c : clients) {
    ProcessOutput out = c.get();
    EXPECT_EQ(out.status, 120) << out.err;
    EXPECT_THAT(out.err, HasSubstr("outcome unknown: "));
    bool named = false;
    for (const std::string& id : lost) named = named || out.err.find(id) != std::string::npos;
    EXPECT_TRUE(named) << out.err;
  }

  ASSERT_EQ(h_.Start({.max_concurrent = 3}), "");
  // One interrupted event per lost run, nothing else closed.
  auto log = h_.OpenAudit();
  ASSERT_NE(log, nullptr);
  std::map<std::string, int> interrupted;
  ASSERT_TRUE(log->ForEachEvent([&](const audit::EventRow& e) {
                   if (e.text(audit::kColKind) == "interrupted") {
                     ++interrupted[std::string(e.text(audit::kColRunId))];
                   }
                   return Status::Ok();
                 })
                  .ok());
  EXPECT_EQ(interrupted.size(), 3u);
  for (const std::string& id : lost) EXPECT_EQ(interrupted[id], 1) << id;
  for (const auto& r : h_.AuditRuns()) {
    if (lost.count(r.run_id)) {
      EXPECT_EQ(r.state, "interrupted");
    }
  }
  EXPECT_EQ(h_.HealthNumber("recovered_runs"), 3);
  EXPECT_THAT(h_.log(), HasSubstr("recovery: 3 runs closed as interrupted"));
  std::string daemon_log = h_.log();
  size_t at = daemon_log.rfind("recovery: ");
  if (at != std::string::npos) {
    std::cout << daemon_log.substr(at, daemon_log.find('\n', at) - at) << "\n";
  }
  // Nothing of the lost runs is left: sandboxes, cgroups, state, records.
  for (const std::string& id : lost) {
    auto left = testing::ResourcesNamingRun(id, LeakOptions());
    EXPECT_TRUE(left.empty()) << testing::JoinLines(left);
  }
  // And the restarted service works.
  ProcessOutput r = h_.Submit("python-untrusted", {"/bin/echo", "after"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "after\n");
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  ExpectNoLeaks();  // after the stop: the restarted daemon is a new child of this test
}

// The microVM twin: the daemon is SIGKILLed while a guest runs. What the run left (its VMM
// cgroup, its run directory under the microVM state root, QEMU if it outlived its parent) is
// removed by the restarted daemon's recovery, and the run is closed as interrupted.
TEST_F(ServeTest, SigkillDuringAMicrovmRunThenRestartLeavesNothingAndRecordsTheLostRun) {
  SAFEX_REQUIRE_INSTALLED_GUEST();
  const std::string microvm_runs = "/var/lib/safex/microvm/runs";
  WriteMicrovmPolicy();
  std::filesystem::create_directories(h_.state_dir());
  ASSERT_EQ(h_.Start({.max_concurrent = 2}), "");
  before_ = testing::LeakSnapshot::Take(LeakOptions());
  auto client = std::async(std::launch::async, [&] {
    return h_.Submit("base-microvm", {"/bin/sh", "-c", "echo started; sleep 1000"});
  });
  // Wait for the start event, then for QEMU in the run's VMM cgroup (the /usr image may have to be
  // fingerprinted or even built first), then for the guest to be well into its boot.
  std::string id;
  auto until = Clock::now() + std::chrono::seconds(60);
  while (id.empty() && Clock::now() < until) {
    for (const auto& r : h_.AuditRuns()) {
      if (r.state == "running") id = r.run_id;
    }
    if (id.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(id.empty()) << h_.log();
  bool vmm_up = false;
  until = Clock::now() + std::chrono::seconds(400);
  while (!vmm_up && Clock::now() < until) {
    for (const char* h : {"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup"}) {
      std::ifstream procs(std::string(h) + "/safex/microvm-" + id + "/cgroup.procs");
      std::string pid;
      if (procs >> pid) vmm_up = true;
    }
    if (!vmm_up) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(vmm_up) << "QEMU never started\n" << h_.log();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  h_.Kill();
  // The connection died after admission: an unknown outcome of the named run, not "refused".
  ProcessOutput out = client.get();
  EXPECT_EQ(out.status, 120) << out.err;
  EXPECT_THAT(out.err, HasSubstr(id));
  // The dead daemon's run is still there (nothing else would remove it).
  EXPECT_TRUE(std::filesystem::exists(microvm_runs + "/" + id));
  EXPECT_FALSE(testing::ResourcesNamingRun(id, LeakOptions()).empty());

  ASSERT_EQ(h_.Start({.max_concurrent = 2}), "");
  auto log = h_.OpenAudit();
  ASSERT_NE(log, nullptr);
  int interrupted = 0;
  ASSERT_TRUE(log->ForEachEvent([&](const audit::EventRow& e) {
                   if (e.text(audit::kColKind) == "interrupted" && e.text(audit::kColRunId) == id) {
                     ++interrupted;
                   }
                   return Status::Ok();
                 })
                  .ok());
  EXPECT_EQ(interrupted, 1);
  for (const auto& r : h_.AuditRuns()) {
    if (r.run_id == id) {
      EXPECT_EQ(r.state, "interrupted");
    }
  }
  EXPECT_EQ(h_.HealthNumber("recovered_runs"), 1);
  auto left = testing::ResourcesNamingRun(id, LeakOptions());
  EXPECT_TRUE(left.empty()) << testing::JoinLines(left);
  EXPECT_FALSE(std::filesystem::exists(microvm_runs + "/" + id));
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  ExpectNoLeaks();
}

TEST_F(ServeTest, SigtermDrainsRunningRunsThenStops) {
  StartAndSnapshot({.max_concurrent = 2, .max_queue = 4, .drain_timeout = "30s"});
  std::vector<std::future<ProcessOutput>> clients;
  for (int i = 0; i < 2; ++i) {
    clients.push_back(std::async(std::launch::async, [&, i] {
      return h_.Submit(
          "python-untrusted",
          {"python3", "-c", "import time; time.sleep(2); print(" + std::to_string(i) + ")"});
    }));
  }
  ASSERT_TRUE(h_.WaitHealth([](const std::string& b) { return HealthShows(b, 2, -1); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto stopper = std::async(std::launch::async, [&] { return h_.Stop(SIGTERM); });
  // The socket goes at once: a new client is told the service is not running.
  auto t0 = Clock::now();
  while (std::filesystem::exists(h_.socket()) && Clock::now() - t0 < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ProcessOutput late = h_.Submit("python-untrusted", {"/bin/echo", "late"});
  EXPECT_EQ(late.status, 125);
  EXPECT_THAT(late.err, HasSubstr("not running"));
  // The running ones finish normally.
  for (int i = 0; i < 2; ++i) {
    ProcessOutput r = clients[i].get();
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, std::to_string(i) + "\n");
  }
  EXPECT_EQ(stopper.get(), 0) << h_.log();
  ExpectNoLeaks();
}

TEST_F(ServeTest, SigtermPastTheDrainDeadlineInterruptsAndRecordsRuns) {
  StartAndSnapshot({.max_concurrent = 1, .max_queue = 2, .drain_timeout = "1s"});
  auto running = std::async(std::launch::async, [&] {
    return h_.Submit("python-untrusted", {"python3", "-c", "import time; time.sleep(9)"},
                     {"--json"});
  });
  ASSERT_TRUE(h_.WaitHealth([](const std::string& b) { return HealthShows(b, 1, -1); }));
  auto queued = std::async(std::launch::async, [&] {
    return h_.Submit("python-untrusted", {"/bin/echo", "queued"}, {"--json"});
  });
  ASSERT_TRUE(h_.WaitHealth([](const std::string& b) { return HealthShows(b, -1, 1); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the sandbox is up
  auto t0 = Clock::now();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(8));
  ProcessOutput r = running.get();
  json j = Parse(r.out);
  EXPECT_EQ(j["verdict"], "interrupted") << r.out;
  EXPECT_EQ(r.status, 128 + SIGTERM);
  ProcessOutput q = queued.get();
  EXPECT_EQ(q.status, 125);
  EXPECT_THAT(q.out, HasSubstr("shutting down"));
  bool recorded = false;
  for (const auto& run : h_.AuditRuns()) {
    if (run.run_id == j["run_id"]) {
      recorded = true;
      EXPECT_EQ(run.state, "interrupted");
      EXPECT_EQ(run.verdict, "interrupted");
      EXPECT_THAT(run.reason, HasSubstr("signal 15"));
    }
  }
  EXPECT_TRUE(recorded);
  ExpectNoLeaks();
}

// The microVM twin: at the drain deadline a guest running `sleep 30` is killed at once (the
// driver honours the cancel token), the run ends interrupted, nothing is left.
TEST_F(ServeTest, SigtermPastTheDrainDeadlineInterruptsAMicrovmRunPromptly) {
  SAFEX_REQUIRE_INSTALLED_GUEST();
  WriteMicrovmPolicy();
  StartAndSnapshot({.max_concurrent = 1, .max_queue = 2, .drain_timeout = "1s"});
  auto running = std::async(std::launch::async, [&] {
    return h_.Submit("base-microvm", {"/bin/sh", "-c", "echo started; sleep 30"}, {"--json"});
  });
  ASSERT_TRUE(h_.WaitHealth([](const std::string& b) { return HealthShows(b, 1, -1); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // QEMU is up (booting)
  auto t0 = Clock::now();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(8));  // 1 s drain + the kill, never 30 s
  ProcessOutput r = running.get();
  json j = Parse(r.out);
  EXPECT_EQ(j["verdict"], "interrupted") << r.out;
  EXPECT_EQ(r.status, 128 + SIGTERM);
  bool recorded = false;
  for (const auto& run : h_.AuditRuns()) {
    if (run.run_id == j["run_id"]) {
      recorded = true;
      EXPECT_EQ(run.state, "interrupted");
      EXPECT_EQ(run.verdict, "interrupted");
      EXPECT_THAT(run.reason, HasSubstr("signal 15"));
    }
  }
  EXPECT_TRUE(recorded);
  if (j.contains("run_id")) {
    auto left = testing::ResourcesNamingRun(j["run_id"].get<std::string>(), LeakOptions());
    EXPECT_TRUE(left.empty()) << testing::JoinLines(left);
  }
  ExpectNoLeaks();
}

TEST_F(ServeTest, SubmitMatchesRunForOutputInputStdinAndExitStatuses) {
  StartAndSnapshot();
  testing::TempDir in;
  in.Write("a.txt", "from a file\n");
  testing::TempDir other;
  std::string stdin_file = other.Write("stdin", "and stdin\n");
  const std::vector<std::string> prog = {
      "python3", "-c",
      "import sys; print(open('/data/in/a.txt').read().strip(), sys.stdin.read().strip())"};
  ProcessOutput s =
      h_.Submit("python-untrusted", prog, {"--input", in.path(), "--stdin", stdin_file});
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(s.out, "from a file and stdin\n");

  std::vector<std::string> run_args = {
      "run",          "--policy",    h_.policy_dir() + "/python-untrusted.policy",
      "--audit-db",   h_.audit_db(), "--state-root",
      h_.state_dir(), "--input",     in.path(),
      "--stdin",      stdin_file,    "--"};
  run_args.insert(run_args.end(), prog.begin(), prog.end());
  ProcessOutput r = testing::RunSafex(run_args);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, s.out);

  struct Case {
    std::vector<std::string> argv;
    int status;
  };
  const Case cases[] = {
      {{"python3", "-c", "import sys; sys.exit(3)"}, 3},
      {{"/no/such/program"}, 127},
      {{"/usr"}, 126},
      {{"python3", "-c", "import os; os.kill(os.getpid(), 9)"}, 137},
      {{"python3", "-c", "print('AKIA' + 'B' * 16)"}, 122},  // a secret: rejected
  };
  for (const Case& c : cases) {
    ProcessOutput sub = h_.Submit("python-untrusted", c.argv);
    EXPECT_EQ(sub.status, c.status) << c.argv[0] << ": " << sub.err;
  }
  // Unknown policy, a policy name that is a path, a policy that does not compile.
  EXPECT_EQ(h_.Submit("no-such-policy", {"/bin/true"}).status, 125);
  EXPECT_EQ(h_.Submit("../python-untrusted", {"/bin/true"}).status, 125);
  h_.dir().Write("policies/broken.policy", "policy \"broken\" { limits { memory = 1MB } }\n");
  ProcessOutput broken = h_.Submit("broken", {"/bin/true"});
  EXPECT_EQ(broken.status, 125);
  EXPECT_THAT(broken.err, HasSubstr("did you mean"));
  ExpectNoLeaks();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

TEST_F(ServeTest, PolicyEditsAreSeenByTheNextRequest) {
  StartAndSnapshot();
  auto digest = [&] {
    ProcessOutput r = h_.Submit("python-untrusted", {"/bin/true"}, {"--json"});
    return Parse(r.out)["plan_digest"].get<std::string>();
  };
  std::string d1 = digest();
  EXPECT_EQ(digest(), d1);
  std::string path = h_.policy_dir() + "/python-untrusted.policy";
  std::string text;
  {
    std::ifstream f(path);
    text.assign(std::istreambuf_iterator<char>(f), {});
  }
  size_t at = text.find("wall_time = 10s");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 15, "wall_time = 9s");
  h_.dir().Write("policies/python-untrusted.policy", text);
  std::string d2 = digest();
  EXPECT_NE(d2, d1);
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

// A damaged audit log is never used: a run checks the events since the last check and is refused
// (503, unrecorded: a log that does not verify is not written to) once one does not verify;
// health says so; and the service does not start over a log whose full check fails.
TEST_F(ServeTest, ADamagedAuditLogRefusesRunsAndStart) {
  StartAndSnapshot();
  ProcessOutput ok = h_.Submit("base-untrusted", {"/bin/echo", "before"});
  ASSERT_EQ(ok.status, 0) << ok.err;
  ProcessOutput edit = testing::RunProcess(
      {"/usr/bin/sqlite3", h_.audit_db(),
       "DROP TRIGGER events_no_update; UPDATE events SET verdict = 'timeout' WHERE seq = "
       "(SELECT max(seq) FROM events);"});
  ASSERT_EQ(edit.status, 0) << edit.err;
  ProcessOutput refused = h_.Submit("base-untrusted", {"/bin/echo", "after"});
  EXPECT_EQ(refused.status, 125) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("does not verify"));
  EXPECT_EQ(refused.out, "");
  auto health = h_.Call("GET", "/v1/health");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(Parse(health->body)["status"], "audit-log-damaged") << health->body;
  EXPECT_THAT(h_.log(), HasSubstr("every run is refused from now on"));
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  // Restarted over the damaged log: refuses to start, and says why.
  std::string err = h_.Start();
  EXPECT_THAT(err, HasSubstr("does not verify")) << err;
  EXPECT_FALSE(h_.running());
  ExpectNoLeaks();
}

TEST_F(ServeTest, SubmitWithoutADaemonExits125) {
  ProcessOutput r = h_.Submit("python-untrusted", {"/bin/true"});
  EXPECT_EQ(r.status, 125);
  EXPECT_THAT(r.err, HasSubstr("not running"));
}

TEST_F(ServeTest, SecondDaemonOnTheSameStateDirRefusesToStart) {
  StartAndSnapshot();
  ProcessOutput second = testing::RunSafex(
      {"serve", "--config", h_.dir().Join("host.policy"), "--socket", h_.dir().Join("b.sock")});
  EXPECT_EQ(second.status, 1);
  EXPECT_THAT(second.err, HasSubstr("another safex serve is running"));
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

// Ctrl-C of `safex run` (the same cancellation path the daemon uses at its drain deadline).
TEST_F(ServeTest, InterruptedSafexRunKillsTheSandboxAndRecordsIt) {
  std::filesystem::create_directories(h_.state_dir());
  before_ = testing::LeakSnapshot::Take(LeakOptions());
  SpawnOptions so;
  so.argv = {testing::SafexBinary(),
             "run",
             "--policy",
             h_.policy_dir() + "/python-untrusted.policy",
             "--audit-db",
             h_.audit_db(),
             "--state-root",
             h_.state_dir(),
             "--json",
             "--",
             "python3",
             "-c",
             "import time; time.sleep(9)"};
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  UniqueFd rd(p[0]), wr(p[1]);
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  so.fds = {{0, devnull.get()}, {1, wr.get()}, {2, devnull.get()}};
  auto child = Subprocess::Spawn(so);
  ASSERT_TRUE(child.ok()) << child.status().message();
  wr.Reset();
  auto until = Clock::now() + std::chrono::seconds(60);
  bool started = false;
  while (!started && Clock::now() < until) {
    for (const auto& r : h_.AuditRuns()) started |= r.state == "running";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(started);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto t0 = Clock::now();
  ASSERT_TRUE(child->Signal(SIGINT).ok());
  auto st = child->Wait(Clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(st.ok() && st->has_value());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(6));
  EXPECT_EQ((*st)->ShellCode(), 130);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(rd.get(), buf, sizeof(buf))) > 0;) out.append(buf, n);
  json j = Parse(out);
  EXPECT_EQ(j["verdict"], "interrupted") << out;
  for (const auto& r : h_.AuditRuns()) {
    if (r.run_id == j["run_id"]) {
      EXPECT_EQ(r.state, "interrupted");
      EXPECT_EQ(r.verdict, "interrupted");
      EXPECT_THAT(r.reason, HasSubstr("signal 2"));
    }
  }
  ExpectNoLeaks();
}

}  // namespace
}  // namespace safex
