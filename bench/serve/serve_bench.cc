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
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "supervisor/serve/client.h"

namespace {

using namespace safex;
using Clock = std::chrono::steady_clock;

constexpr int kMaxConcurrent = 4;

std::string Dir() { return "/var/tmp/safex-serve-bench-" + std::to_string(getpid()); }
std::string Socket() { return Dir() + "/safex.sock"; }
std::string PolicyDir() { return Dir() + "/policies"; }

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

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

// VmRSS and RssAnon/RssFile of a process, in KiB.
struct Rss {
  long total = -1, anon = -1, file = -1;
};
Rss ReadRss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  Rss r;
  for (std::string line; std::getline(in, line);) {
    auto value = [&line] { return std::atol(line.c_str() + line.find(':') + 1); };
    if (line.starts_with("VmRSS:")) r.total = value();
    if (line.starts_with("RssAnon:")) r.anon = value();
    if (line.starts_with("RssFile:")) r.file = value();
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  if (geteuid() != 0) {
    std::fprintf(stderr, "serve_bench: needs root (safex serve, safex run)\n");
    return 2;
  }
  std::filesystem::create_directories(PolicyDir());
  chmod(Dir().c_str(), 0755);
  for (const char* p : {"base-untrusted", "python-untrusted"}) {
    std::filesystem::copy_file(
        std::string(SAFEX_BENCH_SOURCE_DIR) + "/policies/examples/" + p + ".policy",
        PolicyDir() + "/" + p + ".policy");
  }
  std::string config = "host {\n  service {\n";
  config += "    policy_dir = \"" + PolicyDir() + "\"\n";
  config += "    socket = \"" + Socket() + "\"\n";
  config += "    state_dir = \"" + Dir() + "/serve-state\"\n";
  config += "    audit_db = \"" + Dir() + "/serve-audit.db\"\n";
  config += "    max_concurrent = " + std::to_string(kMaxConcurrent) + "\n";
  config += "    max_queue = 16\n";
  config += "    allow \"*\" { users = [0] }\n";
  config += "  }\n}\n";
  if (!WriteFile(Dir() + "/host.policy", config)) return 1;

  UniqueFd log(
      open((Dir() + "/serve.log").c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0600));
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnOptions so;
  so.argv = {SAFEX_BENCH_BINARY,     "serve",       "--config",
             Dir() + "/host.policy", "--audit-key", Dir() + "/audit.key"};
  so.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  so.fds = {{0, devnull.get()}, {1, log.get()}, {2, log.get()}};
  so.parent_death_signal = SIGKILL;
  auto daemon = Subprocess::Spawn(so);
  if (!daemon.ok()) {
    std::fprintf(stderr, "spawn: %s\n", daemon.status().ToString().c_str());
    return 1;
  }
  auto until = Clock::now() + std::chrono::seconds(60);
  bool up = false;
  while (!up && Clock::now() < until) {
    auto r = serve::HttpCall(Socket(), "GET", "/v1/health", "");
    up = r.ok() && r->status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!up) {
    std::fprintf(stderr, "the daemon did not come up (see %s/serve.log)\n", Dir().c_str());
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Rss at_start = ReadRss(daemon->pid());

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
  Rss idle = ReadRss(daemon->pid());
  std::printf(
      "\ndaemon resident memory, idle (KiB): after start %ld (anon %ld, file %ld); after "
      "the %d submits above %ld (anon %ld, file %ld)\n",
      at_start.total, at_start.anon, at_start.file, 2 + 2 * runs + 3 * 2 * runs, idle.total,
      idle.anon, idle.file);

  (void)daemon->Signal(SIGTERM);
  auto st = daemon->Wait(Clock::now() + std::chrono::seconds(60));
  if (!st.ok() || !st->has_value()) daemon->KillAndWait();
  std::error_code ec;
  std::filesystem::remove_all(Dir(), ec);
  return 0;
}
