// Agent sessions (docs/api.md, "Sessions") under measurement, policy python-untrusted with
// sessions allowed, on gVisor, side by side in one run against one private daemon:
//   1. a command in a live session: POST /v1/sessions/ID/exec of /bin/true (waited for, the
//      result read) against the anchors of the same run: a cold `safex submit -- /bin/true` (the
//      client started until it exited) and a cold POST /v1/runs of /bin/true. p50 and p99, and
//      the ratios of the p50s (goal: session command <= 0.3x the cold submit).
//   2. the three-step agent loop (upload a task file, run python3 on it writing a result, fetch
//      the result): as a session (PUT the file, exec, GET the result; the session opened once
//      before and closed after, both outside the timing, and with them inside) against the same
//      as runs (POST with the file, GET of the output file: the runs API's loop of api_bench).
//
//   sudo build/bench/serve/session_bench [runs]      (default 20)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/common/bench_util.h"
#include "bench/serve/bench_daemon.h"
#include "supervisor/serve/base64.h"
#include "supervisor/serve/client.h"

namespace {

using namespace safex;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kPolicy = "bench-session";
constexpr const char* kPolicyText =
    "policy \"bench-session\" extends \"python-untrusted\" {\n"
    "  @override(\"benchmark: agent sessions\") session {\n"
    "    max_execs = 10000\n    idle_timeout = 10m\n    max_lifetime = 1h\n  }\n}\n";
constexpr const char* kAgentProgram =
    "import json\nn = int(open('/tmp/task.txt').read())\n"
    "json.dump({'answer': n * 2}, open('/tmp/result.json', 'w'))\n";
constexpr const char* kRunProgram =
    "import json\nn = int(open('/data/in/task.txt').read())\n"
    "json.dump({'answer': n * 2}, open('/data/out/result.json', 'w'))\n";

double Ms(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// One call that must answer `want` with a body; the body.
Result<std::string> Expect(const std::string& socket, const std::string& method,
                           const std::string& path, const std::string& body, int want) {
  SAFEX_ASSIGN_OR_RETURN(serve::HttpResponse r, serve::HttpCall(socket, method, path, body));
  if (r.status != want) {
    return Status::Internal(method + " " + path + ": HTTP " + std::to_string(r.status) + " " +
                            r.body.substr(0, 300));
  }
  return r.body;
}

Result<std::string> OpenSession(const std::string& socket) {
  SAFEX_ASSIGN_OR_RETURN(std::string body, Expect(socket, "POST", "/v1/sessions",
                                                  json{{"policy", kPolicy}}.dump(), 201));
  return json::parse(body).value("session_id", "");
}

// A run's or a command's result: an error unless its verdict is ok.
Status Ok(const std::string& body) {
  json r = json::parse(body, nullptr, false);
  if (r.is_object() && r.value("verdict", "") == "ok") return Status::Ok();
  return Status::Internal("not ok: " + body.substr(0, 300));
}

Result<double> SessionTrue(const std::string& socket, const std::string& id) {
  const auto t0 = Clock::now();
  SAFEX_ASSIGN_OR_RETURN(std::string body, Expect(socket, "POST", "/v1/sessions/" + id + "/exec",
                                                  json{{"argv", {"/bin/true"}}}.dump(), 200));
  const double ms = Ms(t0);
  SAFEX_RETURN_IF_ERROR(Ok(body));
  return ms;
}

Result<double> RunTrue(const std::string& socket) {
  const auto t0 = Clock::now();
  SAFEX_ASSIGN_OR_RETURN(std::string body,
                         Expect(socket, "POST", "/v1/runs",
                                json{{"policy", kPolicy}, {"argv", {"/bin/true"}}}.dump(), 200));
  const double ms = Ms(t0);
  SAFEX_RETURN_IF_ERROR(Ok(body));
  return ms;
}

Result<double> SubmitTrue(const std::string& socket) {
  return bench::TimedRun(
      {SAFEX_BENCH_BINARY, "submit", "--socket", socket, "--policy", kPolicy, "--", "/bin/true"});
}

Result<double> SessionLoop(const std::string& socket, const std::string& id) {
  const std::string base = "/v1/sessions/" + id;
  const auto t0 = Clock::now();
  SAFEX_RETURN_IF_ERROR(Expect(socket, "PUT", base + "/files/tmp/task.txt", "21", 200).status());
  SAFEX_ASSIGN_OR_RETURN(std::string ran,
                         Expect(socket, "POST", base + "/exec",
                                json{{"argv", {"python3", "-c", kAgentProgram}}}.dump(), 200));
  SAFEX_RETURN_IF_ERROR(Ok(ran));
  SAFEX_ASSIGN_OR_RETURN(std::string result,
                         Expect(socket, "GET", base + "/files/tmp/result.json", "", 200));
  if (result != "{\"answer\": 42}") return Status::Internal("session result: " + result);
  return Ms(t0);
}

Result<double> RunsLoop(const std::string& socket) {
  const auto t0 = Clock::now();
  json body = {{"policy", kPolicy},
               {"argv", {"python3", "-c", kRunProgram}},
               {"files", {{{"name", "task.txt"}, {"data", serve::Base64Encode("21")}}}}};
  SAFEX_ASSIGN_OR_RETURN(std::string ran, Expect(socket, "POST", "/v1/runs", body.dump(), 200));
  SAFEX_RETURN_IF_ERROR(Ok(ran));
  const std::string run_id = json::parse(ran).value("run_id", "");
  SAFEX_ASSIGN_OR_RETURN(
      std::string result,
      Expect(socket, "GET", "/v1/runs/" + run_id + "/files/result.json", "", 200));
  if (result != "{\"answer\": 42}") return Status::Internal("run result: " + result);
  return Ms(t0);
}

Result<double> OpenedLoop(const std::string& socket) {
  const auto t0 = Clock::now();
  SAFEX_ASSIGN_OR_RETURN(std::string id, OpenSession(socket));
  SAFEX_RETURN_IF_ERROR(SessionLoop(socket, id).status());
  SAFEX_RETURN_IF_ERROR(Expect(socket, "DELETE", "/v1/sessions/" + id, "", 200).status());
  return Ms(t0);
}

void Report(const char* what, const std::vector<double>& v, double anchor) {
  const double p50 = Percentile(v, 0.5);
  std::printf("   %-44s p50 %8.1f ms  p99 %8.1f ms", what, p50, Percentile(v, 0.99));
  if (anchor > 0) std::printf("  %.3fx", p50 / anchor);
  std::printf("\n");
}

int Fail(const Status& st) {
  std::fprintf(stderr, "session_bench: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  if (geteuid() != 0) {
    std::fprintf(stderr, "session_bench: needs root (safex serve)\n");
    return 2;
  }
  bench::BenchDaemon daemon("session-bench", 4);
  if (Status st = daemon.Start(); !st.ok()) return Fail(st);
  std::ofstream(daemon.policy_dir() + "/" + kPolicy + ".policy") << kPolicyText;
  const std::string sock = daemon.socket();
  auto id = OpenSession(sock);
  if (!id.ok()) return Fail(id.status());
  std::vector<double> in_session, cold_runs, cold_submits, session_loops, run_loops, opened;
  for (int i = 0; i <= runs; ++i) {  // the first round warms up and is not counted
    auto s = SessionTrue(sock, *id);
    auto r = RunTrue(sock);
    auto c = SubmitTrue(sock);
    auto sl = SessionLoop(sock, *id);
    auto rl = RunsLoop(sock);
    auto ol = OpenedLoop(sock);
    for (const Status& st :
         {s.status(), r.status(), c.status(), sl.status(), rl.status(), ol.status()}) {
      if (!st.ok()) return Fail(st);
    }
    if (i == 0) continue;
    in_session.push_back(*s);
    cold_runs.push_back(*r);
    cold_submits.push_back(*c);
    session_loops.push_back(*sl);
    run_loops.push_back(*rl);
    opened.push_back(*ol);
  }
  Expect(sock, "DELETE", "/v1/sessions/" + *id, "", 200).ok();
  const double submit_p50 = Percentile(cold_submits, 0.5);
  std::printf("1. /bin/true, %d of each, interleaved (ratios to the cold safex submit p50)\n",
              runs);
  Report("cold safex submit (anchor)", cold_submits, submit_p50);
  Report("cold POST /v1/runs", cold_runs, submit_p50);
  Report("command in a live session (POST .../exec)", in_session, submit_p50);
  const double runs_p50 = Percentile(run_loops, 0.5);
  std::printf("2. agent loop: task file in, python3, result out (ratios to the runs' loop)\n");
  Report("as runs (POST with file, GET result; anchor)", run_loops, runs_p50);
  Report("in a live session (PUT, exec, GET)", session_loops, runs_p50);
  Report("session opened and closed around it", opened, runs_p50);
  return 0;
}
