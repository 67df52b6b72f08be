// The warm pool (docs/operating.md) under measurement, policy python-untrusted on gVisor, side by
// side in one run:
//   1. time to first byte of `safex submit -- /bin/echo hi` (the client started, until the first
//      byte of its stdout): against a daemon with a warm pool (waiting for a ready sandbox before
//      each, so every run is a hit), against the same daemon with the pool empty-handed (a
//      cold run through the service), and the anchor: a bare `runsc run` of an equivalent bundle
//      (its whole wall time; /bin/echo's first byte comes within a millisecond of its exit).
//      p50 and p99 of each, and the ratios of the p50s to the anchor.
//   2. back to back: the same submits without waiting for the pool (hits and misses as they
//      come, refills running meanwhile): p50, p99 and the hit rate.
//   3. memory with a pool of 4 waiting: the daemon's resident memory, and each waiting sandbox's
//      (its cgroup's memory usage: the Sentry, the gofer and the waiting launcher).
//   4. refills beside a running program: a CPU-bound program (a shell loop, about half a second)
//      taken from the pool alone (only its own refill boots meanwhile), right after three quick
//      runs emptied the rest of the pool (four refills boot beside it, at the low CPU share of a
//      pooled boot), and beside four bare `runsc run`s two at a time (the same boots at the
//      normal share): p50 and p99 of the time between its first and last line on the host, the
//      work without the hand-over; refills that do not slow running sandboxes leave the second
//      at the first's.
//   5. sustained: for SECONDS at concurrency 1, 2 and 4, bare `runsc run`s against pooled
//      `safex submit`s of /bin/true: runs per second, and the host's CPU time per run (all CPUs'
//      busy time from /proc/stat over the period, divided by the runs): a pool moves the boot off
//      the critical path, not off the CPU, so what safex adds per sandbox lifecycle is the
//      difference of the two; and the same raw runs with the driver's runsc flags (the CPU
//      those flags cost runsc itself). Of the pooled runs' CPU, the service's own (the daemon's
//      /proc/PID/stat, its threads only: the sandboxes are runsc's processes) and the `safex
//      submit` clients' (this process's waited-for children), per run.
//
//   sudo build/bench/serve/pool_bench [runs [SECONDS [PLATFORM]]]   (default 20, 20, systrap)
//
// PLATFORM (systrap or ptrace) is the gVisor platform of both policies and of the anchor.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_util.h"
#include "bench/gvisor/raw_runsc.h"
#include "bench/serve/bench_daemon.h"
#include "common/proc_stat.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "compiler/compiler.h"
#include "supervisor/serve/client.h"

namespace {

using namespace safex;
using Clock = std::chrono::steady_clock;

constexpr int kPoolSize = 4;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// `safex submit --socket S --policy P -- program...`.
std::vector<std::string> SubmitArgv(const std::string& socket, const std::string& policy,
                                    std::initializer_list<std::string> program) {
  std::vector<std::string> argv = {SAFEX_BENCH_BINARY, "submit", "--socket", socket,
                                   "--policy",         policy,   "--"};
  argv.insert(argv.end(), program);
  return argv;
}

// A client started with its stdout on a pipe (stdin and stderr /dev/null): read `out` to EOF,
// then wait for `process`.
struct Client {
  Subprocess process;
  UniqueFd out;
};

Result<Client> SpawnWithStdoutPipe(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnOptions so;
  so.argv = argv;
  so.fds = {{0, devnull.get()}, {1, write_end.get()}, {2, devnull.get()}};
  SAFEX_ASSIGN_OR_RETURN(Subprocess p, Subprocess::Spawn(so));
  return Client{std::move(p), std::move(read_end)};
}

// `safex submit ... -- /bin/echo hi`: ms from the spawn to the first byte on its stdout; an error
// unless it printed "hi" and exited 0.
Result<double> FirstByte(const std::string& socket, const std::string& policy) {
  const std::vector<std::string> argv = SubmitArgv(socket, policy, {"/bin/echo", "hi"});
  const auto t0 = Clock::now();
  SAFEX_ASSIGN_OR_RETURN(Client c, SpawnWithStdoutPipe(argv));
  char buf[64];
  const ssize_t n = read(c.out.get(), buf, sizeof buf);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  SAFEX_ASSIGN_OR_RETURN(std::optional<ExitStatus> st, c.process.Wait());
  if (n < 2 || std::string(buf, 2) != "hi" || !st || !st->exited || st->code != 0) {
    return Status::Internal("safex submit failed");
  }
  return ms;
}

// The CPU-bound work of phase 4: a line, a shell loop with no system calls, a line.
constexpr const char* kWorkScript =
    "echo s; i=0; while [ $i -lt 600000 ]; do i=$((i+1)); done; echo e";

// `safex submit ... -- /bin/sh -c kWorkScript`: ms between the arrival of its first and its last
// line on the host; an error unless it printed both and exited 0.
Result<double> WorkMs(const std::string& socket) {
  SAFEX_ASSIGN_OR_RETURN(Client c, SpawnWithStdoutPipe(SubmitArgv(socket, "python-untrusted",
                                                                  {"/bin/sh", "-c", kWorkScript})));
  std::string out;
  std::optional<Clock::time_point> first, last;
  char buf[64];
  for (ssize_t n; (n = read(c.out.get(), buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (!first && out.find("s\n") != std::string::npos) first = Clock::now();
    if (!last && out.find("e\n") != std::string::npos) last = Clock::now();
  }
  SAFEX_ASSIGN_OR_RETURN(std::optional<ExitStatus> st, c.process.Wait());
  if (out != "s\ne\n" || !first || !last || !st || !st->exited || st->code != 0) {
    return Status::Internal("safex submit of the work failed: output '" + out + "'");
  }
  const double ms = std::chrono::duration<double, std::milli>(*last - *first).count();
  // Both lines at once would mean the output was held back, not timed.
  if (ms < 1) return Status::Internal("the work's two lines arrived together");
  return ms;
}

// A value of the daemon's GET /metrics (-1 when absent).
int64_t Metric(const std::string& socket, const std::string& name) {
  auto r = serve::HttpCall(socket, "GET", "/metrics", "");
  if (!r.ok()) return -1;
  const size_t at = r->body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::atoll(r->body.c_str() + at + name.size() + 2);
}

bool WaitReady(const std::string& socket, int64_t n) {
  const auto until = Clock::now() + std::chrono::seconds(120);
  while (Clock::now() < until) {
    if (Metric(socket, "safex_pool_ready{policy=\"python-untrusted\"}") >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Memory charged to each waiting sandbox's cgroup (v1 memory.usage_in_bytes or v2
// memory.current under <root>/safex/sbx-*), in KiB.
std::vector<long> SandboxMemoryKib() {
  std::vector<long> out;
  for (const char* root : {"/sys/fs/cgroup/memory/safex", "/sys/fs/cgroup/safex"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(root, ec)) {
      if (!e.path().filename().string().starts_with("sbx-")) continue;
      for (const char* f : {"/memory.usage_in_bytes", "/memory.current"}) {
        std::ifstream in(e.path().string() + f);
        long bytes = -1;
        if (in >> bytes) {
          out.push_back(bytes / 1024);
          break;
        }
      }
    }
    if (!out.empty()) break;
  }
  return out;
}

// All CPUs' busy time so far (user, nice, system, irq, softirq, steal; /proc/stat), in seconds.
double HostBusySeconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return (user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A process's own CPU time so far (utime + stime of /proc/PID/stat; not its children's), in
// seconds; 0 if it cannot be read.
double ProcessCpuSeconds(pid_t pid) {
  const std::optional<ProcStat> stat = ReadProcStat(pid);
  return stat ? static_cast<double>(TicksToNs(stat->utime_ticks + stat->stime_ticks)) / 1e9 : 0;
}

// The CPU time of this process's waited-for children so far, in seconds.
double ChildrenCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct Sustained {
  double runs_per_second = 0;
  double cpu_ms_per_run = 0;
  double service_ms_per_run = 0;   // the daemon's own CPU (`service`), per run
  double children_ms_per_run = 0;  // this process's children (pooled: the `safex submit`s)
};

// `one(thread, i)` at `threads` at once for `seconds`: runs per second and host CPU per run, and
// the CPU per run of the process `service` (when given) and of this process's children.
template <typename Fn>
Sustained Sustain(int threads, double seconds, Fn one, pid_t service = -1) {
  std::atomic<int> runs{0}, failed{0};
  const double busy0 = HostBusySeconds();
  const double service0 = service > 0 ? ProcessCpuSeconds(service) : 0;
  const double children0 = ChildrenCpuSeconds();
  const auto t0 = Clock::now();
  const auto until = t0 + std::chrono::duration<double>(seconds);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; Clock::now() < until; ++i) {
        auto r = one(t, i);
        if (r.ok()) {
          ++runs;
        } else if (failed++ == 0) {
          std::fprintf(stderr, "first failed run: %s\n", r.status().ToString().c_str());
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double busy = HostBusySeconds() - busy0;
  const double service_cpu = service > 0 ? ProcessCpuSeconds(service) - service0 : 0;
  const double children_cpu = ChildrenCpuSeconds() - children0;
  if (failed.load() > 0) std::fprintf(stderr, "%d runs failed\n", failed.load());
  Sustained out;
  out.runs_per_second = runs.load() / wall;
  if (runs.load() > 0) {
    out.cpu_ms_per_run = 1000.0 * busy / runs.load();
    out.service_ms_per_run = 1000.0 * service_cpu / runs.load();
    out.children_ms_per_run = 1000.0 * children_cpu / runs.load();
  }
  return out;
}

void Report(const char* what, const std::vector<double>& v, double anchor_p50) {
  const double p50 = Percentile(v, 0.5);
  std::printf("%-34s %9.1f %9.1f %8.2fx\n", what, p50, Percentile(v, 0.99),
              anchor_p50 > 0 ? p50 / anchor_p50 : 0);
}

// Phase 4, `rounds` of its three cases interleaved; false when a run failed.
bool RefillsBesideAProgram(const std::string& socket, const std::vector<bench::RawBundle>& slots,
                           int rounds) {
  std::vector<double> alone, refills, raw_boots;
  std::atomic<int> raw_ids{200000};
  int64_t refills_during = 0;  // pooled sandboxes made while the second case's work ran
  for (int i = 0; i < rounds; ++i) {
    if (!WaitReady(socket, kPoolSize)) return false;
    auto a = WorkMs(socket);

    // Three quick runs take three sandboxes (their refills start at their hand-overs); the work
    // takes the fourth.
    if (!WaitReady(socket, kPoolSize)) return false;
    std::vector<std::thread> quick;
    std::atomic<int> quick_failed{0};
    for (int t = 0; t < kPoolSize - 1; ++t) {
      quick.emplace_back([&] {
        if (!bench::TimedRun(SubmitArgv(socket, "python-untrusted", {"/bin/true"})).ok()) {
          ++quick_failed;
        }
      });
    }
    for (auto& t : quick) t.join();
    const int64_t made_before = Metric(socket, "safex_pool_refills_total");
    auto b = WorkMs(socket);
    refills_during += Metric(socket, "safex_pool_refills_total") - made_before;

    // The same four boots as bare runsc at the normal share, two at a time (the pool boots as
    // many at once as there are CPUs, at most four; two here).
    if (!WaitReady(socket, kPoolSize)) return false;
    std::atomic<int> left{kPoolSize}, raw_failed{0};
    std::vector<std::thread> boots;
    for (size_t t = 0; t < 2; ++t) {
      boots.emplace_back([&, t] {
        while (left.fetch_sub(1) > 0) {
          if (!bench::RawRun(slots[t], raw_ids++, false).ok()) ++raw_failed;
        }
      });
    }
    auto c = WorkMs(socket);
    for (auto& t : boots) t.join();

    if (!a.ok() || !b.ok() || !c.ok() || quick_failed.load() > 0 || raw_failed.load() > 0) {
      std::fprintf(stderr, "refills: a run failed: %s / %s / %s\n", a.status().ToString().c_str(),
                   b.status().ToString().c_str(), c.status().ToString().c_str());
      return false;
    }
    alone.push_back(*a);
    refills.push_back(*b);
    raw_boots.push_back(*c);
  }
  std::printf("\nrefills beside a running program: its work (a shell loop) in ms, %d rounds\n",
              rounds);
  std::printf("%-34s %9s %9s %9s\n", "", "p50", "p99", "p50/alone");
  const double anchor = Percentile(alone, 0.5);
  Report("alone (its own refill only)", alone, anchor);
  Report("beside four refills (low share)", refills, anchor);
  Report("beside four bare runsc boots", raw_boots, anchor);
  std::printf("refills that ended while the work ran beside them: %.1f per round\n",
              static_cast<double>(refills_during) / rounds);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  const double seconds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  const std::string platform = argc > 3 ? argv[3] : "systrap";
  if (platform != "systrap" && platform != "ptrace") {
    std::fprintf(stderr, "pool_bench: PLATFORM is systrap or ptrace\n");
    return 2;
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "pool_bench: needs root (safex serve, runsc)\n");
    return 2;
  }
  const std::string policy_file =
      std::string(SAFEX_BENCH_SOURCE_DIR) + "/policies/examples/python-untrusted.policy";
  compiler::CompileResult compiled = compiler::CompileFile(policy_file, {});
  if (!compiled.ok()) {
    std::fprintf(stderr, "%s", compiler::RenderAll(compiled).c_str());
    return 1;
  }
  // The bare bundle gets a plain directory where the driver makes an input snapshot or output
  // tmpfs; everything else of the plan is the same.
  plan::Plan plan = *compiled.plan;
  plan.gvisor.platform = platform;
  // (Not /var/tmp/safex-pool-bench-PID: that is the bench daemon's own directory.)
  const std::string scratch = "/var/tmp/safex-pool-bench-raw-" + std::to_string(getpid());
  std::filesystem::create_directories(scratch);
  plan = bench::WithPlainDirs(plan, scratch);
  bench::RawBundle bundle;
  if (Status st = bundle.Make(plan, {"/bin/echo", "hi"}, "pool"); !st.ok()) {
    std::fprintf(stderr, "bundle: %s\n", st.ToString().c_str());
    return 1;
  }
  // One /bin/true bundle per concurrent slot: the spec names its cgroup, and two live containers
  // cannot share one.
  std::vector<bench::RawBundle> slots(4);
  for (size_t t = 0; t < slots.size(); ++t) {
    if (Status st = slots[t].Make(plan, {"/bin/true"}, "slot" + std::to_string(t)); !st.ok()) {
      std::fprintf(stderr, "bundle: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  // python-untrusted is pooled; base-untrusted (the same daemon) is not: the cold run through the
  // service. Its plan differs (python-untrusted extends it), the work (/bin/echo) is the same.
  bench::BenchDaemon daemon(
      "pool-bench", 4,
      "    pool \"python-untrusted\" { size = " + std::to_string(kPoolSize) + " }\n");
  daemon.set_platform(platform);
  if (Status st = daemon.Start(); !st.ok()) {
    std::fprintf(stderr, "daemon: %s\n", st.ToString().c_str());
    return 1;
  }
  if (!WaitReady(daemon.socket(), kPoolSize)) {
    std::fprintf(stderr, "the pool never filled\n");
    return 1;
  }
  const bench::Rss rss = bench::ReadRss(daemon.pid());
  const std::vector<long> sandboxes = SandboxMemoryKib();

  std::vector<double> raw, pooled, cold, back_to_back;
  for (int i = 0; i < runs; ++i) {
    auto r = bench::RawRun(bundle, i, false);
    if (!WaitReady(daemon.socket(), 1)) return 1;
    auto p = FirstByte(daemon.socket(), "python-untrusted");
    auto c = FirstByte(daemon.socket(), "base-untrusted");
    if (!r.ok() || !p.ok() || !c.ok()) {
      std::fprintf(stderr, "a run failed: %s / %s / %s\n", r.status().ToString().c_str(),
                   p.status().ToString().c_str(), c.status().ToString().c_str());
      return 1;
    }
    raw.push_back(*r);
    pooled.push_back(*p);
    cold.push_back(*c);
  }
  if (!WaitReady(daemon.socket(), kPoolSize)) return 1;
  const int64_t hits_before = Metric(daemon.socket(), "safex_pool_hits_total");
  for (int i = 0; i < runs; ++i) {
    auto p = FirstByte(daemon.socket(), "python-untrusted");
    if (!p.ok()) return 1;
    back_to_back.push_back(*p);
  }
  const int64_t hits = Metric(daemon.socket(), "safex_pool_hits_total") - hits_before;

  const double anchor = Percentile(raw, 0.5);
  std::printf("pool_bench: %d runs each, /bin/echo hi, platform %s, time to first byte in ms\n",
              runs, platform.c_str());
  std::printf("%-34s %9s %9s %9s\n", "", "p50", "p99", "p50/raw");
  Report("raw runsc run (anchor)", raw, anchor);
  Report("safex submit, warm pool", pooled, anchor);
  Report("safex submit, cold (no pool)", cold, anchor);
  Report("safex submit, back to back", back_to_back, anchor);
  std::printf("back to back: %lld of %d runs were pool hits\n", static_cast<long long>(hits), runs);
  std::printf("memory with %d waiting: daemon RSS %ld KiB; per sandbox (cgroup) KiB:", kPoolSize,
              rss.total);
  for (long k : sandboxes) std::printf(" %ld", k);
  std::printf("\n");

  if (!RefillsBesideAProgram(daemon.socket(), slots, runs)) return 1;

  std::printf("\nsustained, /bin/true, %.0f s per point: runs/s and host CPU ms per run\n",
              seconds);
  std::printf("%-12s %14s %14s %14s %14s %18s %12s %12s\n", "concurrency", "raw runs/s",
              "pooled runs/s", "raw CPU ms", "pooled CPU ms", "raw+flags CPU ms", "service ms",
              "submit ms");
  std::atomic<int> raw_ids{100000};
  const std::string socket = daemon.socket();
  for (int k : {1, 2, 4}) {
    if (!WaitReady(socket, kPoolSize)) return 1;
    const Sustained r = Sustain(k, seconds, [&](int t, int) {
      return bench::RawRun(slots[static_cast<size_t>(t)], raw_ids++, false);
    });
    if (!WaitReady(socket, kPoolSize)) return 1;
    const Sustained p = Sustain(
        k, seconds,
        [&](int, int) -> Result<double> {
          return bench::TimedRun(SubmitArgv(socket, "python-untrusted", {"/bin/true"}));
        },
        daemon.pid());
    // Raw runsc with the driver's runsc flags (--debug-log, --strace of fork-like calls): how
    // much of what a pooled lifecycle adds is runsc's own work for those flags.
    const Sustained f = Sustain(k, seconds, [&](int t, int) {
      return bench::RawRun(slots[static_cast<size_t>(t)], raw_ids++, true);
    });
    std::printf("%-12d %14.2f %14.2f %14.1f %14.1f %18.1f %12.1f %12.1f\n", k, r.runs_per_second,
                p.runs_per_second, r.cpu_ms_per_run, p.cpu_ms_per_run, f.cpu_ms_per_run,
                p.service_ms_per_run, p.children_ms_per_run);
  }
  std::filesystem::remove_all(scratch);
  return 0;
}
