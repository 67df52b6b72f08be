// `safex submit` through a running `safex serve` against `safex run` for the same work (policy
// python-untrusted, /bin/true and `python3 -c pass`), interleaved so that machine load affects both
// alike; the daemon's resident memory when idle (after start, and after the runs); then runs per
// second of each at concurrency 1, 2 and 4.
//
// Both sides are the whole command as a user runs it: `safex submit` is a client process that
// sends one HTTP request over the Unix socket and prints the result; `safex run` compiles the
// policy, opens the audit log and runs the same supervisor::Runner path the daemon's workers use.
// Both write to a real audit log (each its own file) and to their own state directory.
//
//   sudo build/bench/serve/serve_bench [runs-per-case]      (default 20)
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_util.h"
#include "bench/serve/bench_daemon.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "supervisor/serve/client.h"

namespace {

using namespace safex;
using Clock = std::chrono::steady_clock;

constexpr int kMaxConcurrent = 4;

bench::BenchDaemon* g_daemon = nullptr;
std::string Dir() { return g_daemon->dir(); }
std::string Socket() { return g_daemon->socket(); }
std::string PolicyDir() { return g_daemon->policy_dir(); }

Result<double> Submit(const std::vector<std::string>& program) {
  std::vector<std::string> argv = {SAFEX_BENCH_BINARY, "submit",           "--socket", Socket(),
                                   "--policy",         "python-untrusted", "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  return bench::TimedRun(argv);
}

Result<double> Run(const std::vector<std::string>& program) {
  std::vector<std::string> argv = {SAFEX_BENCH_BINARY,
                                   "run",
                                   "--policy",
                                   PolicyDir() + "/python-untrusted.policy",
                                   "--audit-db",
                                   Dir() + "/run-audit.db",
                                   "--audit-key",
                                   Dir() + "/audit.key",
                                   "--state-root",
                                   Dir() + "/run-state",
                                   "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  return bench::TimedRun(argv);
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  if (geteuid() != 0) {
    std::fprintf(stderr, "serve_bench: needs root (safex serve, safex run)\n");
    return 2;
  }
  bench::BenchDaemon daemon("serve-bench", kMaxConcurrent);
  g_daemon = &daemon;
  if (Status st = daemon.Start(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  bench::Rss at_start = bench::ReadRss(daemon.pid());

  struct Case {
    const char* name;
    std::vector<std::string> argv;
    std::vector<double> run, submit;
  };
  std::vector<Case> cases = {{"/bin/true", {"/bin/true"}, {}, {}},
                             {"python3 -c pass", {"python3", "-c", "pass"}, {}, {}}};
  // One of each first: the policy compiles once in the daemon, page cache warms for both.
  for (Case& c : cases) {
    if (!Run(c.argv).ok() || !Submit(c.argv).ok()) {
      std::fprintf(stderr, "warm-up failed (see %s/serve.log)\n", Dir().c_str());
      return 1;
    }
  }
  for (int i = 0; i < runs; ++i) {
    for (Case& c : cases) {
      // Alternate which goes first, so neither always follows the other's teardown.
      auto a = i % 2 == 0 ? Run(c.argv) : Submit(c.argv);
      auto b = i % 2 == 0 ? Submit(c.argv) : Run(c.argv);
      if (!a.ok() || !b.ok()) {
        std::fprintf(stderr, "run failed: %s / %s\n", a.status().ToString().c_str(),
                     b.status().ToString().c_str());
        return 1;
      }
      c.run.push_back(i % 2 == 0 ? *a : *b);
      c.submit.push_back(i % 2 == 0 ? *b : *a);
    }
  }
  std::printf("serve_bench: %d runs per case, policy python-untrusted, median wall ms\n", runs);
  std::printf("%-18s %12s %14s %10s\n", "program", "safex run", "safex submit", "ratio");
  for (Case& c : cases) {
    double r = bench::Median(c.run), s = bench::Median(c.submit);
    std::printf("%-18s %12.1f %14.1f %9.3fx\n", c.name, r, s, s / r);
  }

  std::printf("\nruns per second, /bin/true, %d runs per point (daemon max_concurrent %d)\n",
              2 * runs, kMaxConcurrent);
  std::printf("%-12s %12s %14s\n", "concurrency", "safex run", "safex submit");
  for (int k : {1, 2, 4}) {
    double r = bench::Throughput(k, 2 * runs, [](int, int) { return Run({"/bin/true"}); });
    double s = bench::Throughput(k, 2 * runs, [](int, int) { return Submit({"/bin/true"}); });
    std::printf("%-12d %12.2f %14.2f\n", k, r, s);
  }

  std::this_thread::sleep_for(std::chrono::seconds(2));
  bench::Rss idle = bench::ReadRss(daemon.pid());
  std::printf(
      "\ndaemon resident memory, idle (KiB): after start %ld (anon %ld, file %ld); after "
      "the %d submits above %ld (anon %ld, file %ld)\n",
      at_start.total, at_start.anon, at_start.file, 2 + 2 * runs + 3 * 2 * runs, idle.total,
      idle.anon, idle.file);

  return 0;
}
