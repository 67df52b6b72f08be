// The runs API (docs/api.md) under measurement, against a private daemon (bench_daemon.h),
// policy python-untrusted on gVisor:
//   1. first streamed byte: a program prints its wall-clock time (time.time()) every 100 ms; a
//      client follows GET /v1/runs/ID/events and notes when each stdout event arrives; the
//      latency is arrival minus the printed time (both CLOCK_REALTIME on this host: gVisor's
//      clock is the host's). Medians and the 90th percentile over every line of 5 runs.
//   2. eight followed streams at once: 8 runs printing 200 lines each over 2 s, each followed by
//      its own client; the daemon's resident memory before, at its highest during, and after.
//   3. a three-step agent loop: upload an input file, run a program that reads it and writes a
//      result file, fetch the result. Through the API (one POST with the file and wait, one GET
//      of the file) against `safex run --input DIR --output DIR` (the anchor) for the same work.
//
//   sudo build/bench/serve/api_bench [loops]      (default 10)
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_util.h"
#include "bench/serve/bench_daemon.h"
#include "supervisor/serve/base64.h"
#include "supervisor/serve/client.h"
#include "supervisor/serve/unix_socket.h"

namespace {

using namespace safex;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double RealtimeSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

std::string StartRun(const std::string& socket, const std::string& program) {
  json body = {{"policy", "python-untrusted"},
               {"argv", {"python3", "-c", program}},
               {"wait", false}};
  auto r = serve::HttpCall(socket, "POST", "/v1/runs", body.dump());
  if (!r.ok() || r->status != 202) return "";
  return json::parse(r->body, nullptr, false).value("run_id", "");
}

// Follows a run's events until the stream ends; calls `on_stdout(data, arrival)` per stdout event.
template <typename Fn>
bool Follow(const std::string& socket, const std::string& run_id, Fn on_stdout) {
  auto fd = serve::ConnectUnix(socket);
  if (!fd.ok()) return false;
  const std::string req = "GET /v1/runs/" + run_id + "/events HTTP/1.1\r\n\r\n";
  if (send(fd->get(), req.data(), req.size(), MSG_NOSIGNAL) != ssize_t(req.size())) return false;
  std::string buf;
  bool body = false;
  for (;;) {
    char chunk[65536];
    ssize_t n = recv(fd->get(), chunk, sizeof(chunk), 0);
    if (n <= 0) return true;
    const double at = RealtimeSeconds();
    buf.append(chunk, size_t(n));
    if (!body) {
      size_t end = buf.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      buf.erase(0, end + 4);
      body = true;
    }
    for (;;) {
      size_t eol = buf.find("\r\n");
      if (eol == std::string::npos) break;
      size_t size = std::stoul(buf.substr(0, eol), nullptr, 16);
      if (size == 0) return true;
      if (buf.size() < eol + 4 + size) break;
      json e = json::parse(buf.substr(eol + 2, size), nullptr, false);
      buf.erase(0, eol + 4 + size);
      if (e.value("type", "") == "stdout") on_stdout(e.value("data", ""), at);
    }
  }
}

void FirstByte(const std::string& socket) {
  const std::string program =
      "import time\nfor i in range(30):\n  print(repr(time.time()), flush=True)\n"
      "  time.sleep(0.1)\n";
  std::vector<double> latency_ms;
  for (int run = 0; run < 5; ++run) {
    const std::string id = StartRun(socket, program);
    if (id.empty()) {
      std::fprintf(stderr, "api_bench: the run was not admitted\n");
      return;
    }
    Follow(socket, id, [&](const std::string& data, double at) {
      size_t start = 0;
      for (size_t nl; (nl = data.find('\n', start)) != std::string::npos; start = nl + 1) {
        latency_ms.push_back((at - std::atof(data.substr(start, nl - start).c_str())) * 1000);
      }
    });
  }
  std::printf("1. first streamed byte after the program wrote it (%zu lines of 5 runs)\n",
              latency_ms.size());
  std::printf("   p50 %.1f ms, p90 %.1f ms, max %.1f ms (goal: p50 <= 20 ms)\n\n",
              Percentile(latency_ms, 0.5), Percentile(latency_ms, 0.9),
              Percentile(latency_ms, 1.0));
}

void EightStreams(const std::string& socket, pid_t daemon) {
  const std::string program =
      "import time\nfor i in range(200):\n  print('line', i, 'x' * 60, flush=True)\n"
      "  time.sleep(0.01)\n";
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const bench::Rss before = bench::ReadRss(daemon);
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(StartRun(socket, program));
  std::atomic<long> peak{before.total};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      peak = std::max(peak.load(), bench::ReadRss(daemon).total);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::vector<std::thread> followers;
  std::vector<size_t> lines(8, 0);
  const auto t0 = Clock::now();
  for (int i = 0; i < 8; ++i) {
    followers.emplace_back([&, i] {
      Follow(socket, ids[i], [&](const std::string& data, double) {
        lines[i] += size_t(std::count(data.begin(), data.end(), '\n'));
      });
    });
  }
  for (auto& t : followers) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  done = true;
  sampler.join();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const bench::Rss after = bench::ReadRss(daemon);
  size_t total = 0;
  for (size_t n : lines) total += n;
  std::printf("2. eight runs followed at once (daemon max_concurrent 8): %zu of 1600 lines in "
              "%.1f s\n",
              total, seconds);
  std::printf("   daemon RSS: before %ld KiB, highest during %ld KiB, after %ld KiB\n\n",
              before.total, peak.load(), after.total);
}

constexpr const char* kAgentProgram =
    "import json\nn = int(open('/data/in/task.txt').read())\n"
    "json.dump({'answer': n * 2}, open('/data/out/result.json', 'w'))\n";

Result<double> ApiLoop(const std::string& socket) {
  const auto t0 = Clock::now();
  json body = {{"policy", "python-untrusted"},
               {"argv", {"python3", "-c", kAgentProgram}},
               {"files", {{{"name", "task.txt"}, {"data", serve::Base64Encode("21")}}}}};
  SAFEX_ASSIGN_OR_RETURN(auto run, serve::HttpCall(socket, "POST", "/v1/runs", body.dump()));
  json r = json::parse(run.body, nullptr, false);
  if (run.status != 200 || r.value("verdict", "") != "ok") {
    return Status::Internal("run: " + run.body.substr(0, 300));
  }
  SAFEX_ASSIGN_OR_RETURN(auto file,
                         serve::HttpCall(socket, "GET",
                                         "/v1/runs/" + r.value("run_id", "") +
                                             "/files/result.json",
                                         ""));
  if (file.status != 200 || file.body != "{\"answer\": 42}") {
    return Status::Internal("fetch: " + file.body.substr(0, 300));
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Result<double> CliLoop(const bench::BenchDaemon& d, int i) {
  const std::string in = d.dir() + "/cli-in", out = d.dir() + "/cli-out-" + std::to_string(i);
  std::filesystem::create_directories(in);
  std::filesystem::create_directories(out);
  const auto t0 = Clock::now();
  std::ofstream(in + "/task.txt") << "21";
  auto ran = bench::TimedRun({SAFEX_BENCH_BINARY, "run", "--policy",
                              d.policy_dir() + "/python-untrusted.policy", "--audit-db",
                              d.dir() + "/run-audit.db", "--audit-key", d.dir() + "/audit.key",
                              "--state-root", d.dir() + "/run-state", "--input", in, "--output",
                              out, "--", "python3", "-c", kAgentProgram});
  if (!ran.ok()) return ran.status();
  std::ifstream result(out + "/result.json");
  std::string text((std::istreambuf_iterator<char>(result)), {});
  if (text != "{\"answer\": 42}") return Status::Internal("cli result: " + text);
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int loops = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
  if (geteuid() != 0) {
    std::fprintf(stderr, "api_bench: needs root (safex serve, safex run)\n");
    return 2;
  }
  bench::BenchDaemon daemon("api-bench", 8);
  if (Status st = daemon.Start(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  FirstByte(daemon.socket());
  EightStreams(daemon.socket(), daemon.pid());

  std::vector<double> api, cli;
  if (!ApiLoop(daemon.socket()).ok() || !CliLoop(daemon, -1).ok()) {  // warm-up
    std::fprintf(stderr, "api_bench: warm-up failed (see %s/serve.log)\n", daemon.dir().c_str());
    return 1;
  }
  for (int i = 0; i < loops; ++i) {
    auto a = ApiLoop(daemon.socket());
    auto c = CliLoop(daemon, i);
    if (!a.ok() || !c.ok()) {
      std::fprintf(stderr, "api_bench: %s / %s\n", a.status().ToString().c_str(),
                   c.status().ToString().c_str());
      return 1;
    }
    api.push_back(*a);
    cli.push_back(*c);
  }
  const double a = bench::Median(api), c = bench::Median(cli);
  std::printf("3. agent loop (upload input, run python3, fetch result.json), %d loops, median\n",
              loops);
  std::printf("   runs API %.1f ms, safex run --input/--output %.1f ms: %.2fx\n", a, c, a / c);
  std::printf("   (independent figure for hosted sandboxes: Daytona 0.11 s median to first "
              "exec)\n");
  return 0;
}
