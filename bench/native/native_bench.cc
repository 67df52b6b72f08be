// The native backend against the tools it is measured by, interleaved so that machine load
// affects all alike, for /bin/true and `python3 -c pass`:
//   bwrap        Debian's bubblewrap: --unshare-all --die-with-parent, the same read-only binds
//                (/usr /lib /lib64 /bin), a tmpfs /tmp, its own /proc and /dev, no network
//   unshare      `unshare -fp --mount-proc`: a pid namespace and /proc, nothing else
//   driver       NativeDriver::Run in this process: namespaces, the fresh root, the id lease,
//                cgroups, Landlock, seccomp, the evidence read back, output capture, teardown
//   safex run    the whole CLI as a user runs it: compile the policy, verify the plan again, open
//                the audit log (synchronous=FULL), record start, the driver, validation, record end
// Then runs per second of bwrap and `safex run` at concurrency 1, 2 and 4.
//
//   sudo build/bench/native/native_bench [runs-per-case]      (default 20)
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "bench/common/bench_plan.h"
#include "bench/common/bench_util.h"
#include "drivers/native/native_driver.h"

namespace {

using namespace safex;
using Clock = std::chrono::steady_clock;

std::string WorkDir() { return "/var/tmp/safex-native-bench-" + std::to_string(getpid()); }

// The plan both the driver and `safex run` use (the policy below compiles to it).
plan::Plan NativePlan() {
  plan::Plan p = bench::BenchPlan(plan::Backend::kNative);
  p.policy_name = "native-bench";
  p.trust = plan::Trust::kTrusted;
  p.process.uid = 65534;
  p.process.gid = 65534;
  p.process.cwd = "/";
  // The binds before /tmp, as the policy below lists them.
  std::vector<plan::Mount> binds;
  for (const char* d : {"/usr", "/lib", "/lib64", "/bin"}) binds.push_back(bench::Bind(d));
  p.mounts.insert(p.mounts.begin(), binds.begin(), binds.end());
  return p;
}

constexpr char kPolicy[] = R"(policy "native-bench" {
  trust = trusted
  isolation = native
  limits {
    wall_time = 30s
    cpu_time = 10s
    memory = 256MiB
    pids = 64
    open_files = 256
    output = 1MiB
    disk = 64MiB
    cpus = 1
  }
  rootfs host_readonly ["/usr", "/lib", "/lib64", "/bin"]
  mount tmpfs at "/tmp" { size = 64MiB }
  env { set PATH = "/usr/bin:/bin" }
}
)";

Result<double> Bwrap(const std::vector<std::string>& program) {
  std::vector<std::string> argv = {"/usr/bin/bwrap",
                                   "--unshare-all",
                                   "--die-with-parent",
                                   "--ro-bind",
                                   "/usr",
                                   "/usr",
                                   "--ro-bind",
                                   "/lib",
                                   "/lib",
                                   "--ro-bind",
                                   "/lib64",
                                   "/lib64",
                                   "--ro-bind",
                                   "/bin",
                                   "/bin",
                                   "--tmpfs",
                                   "/tmp",
                                   "--proc",
                                   "/proc",
                                   "--dev",
                                   "/dev",
                                   "--setenv",
                                   "PATH",
                                   "/usr/bin:/bin",
                                   "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  argv[argv.size() - program.size()] = program[0][0] == '/' ? program[0] : "/usr/bin/" + program[0];
  return bench::TimedRun(argv);
}

Result<double> Unshare(const std::vector<std::string>& program) {
  std::vector<std::string> argv = {"/usr/bin/unshare", "-fp", "--mount-proc"};
  argv.push_back(program[0][0] == '/' ? program[0] : "/usr/bin/" + program[0]);
  argv.insert(argv.end(), program.begin() + 1, program.end());
  return bench::TimedRun(argv);
}

Result<double> SafexRun(const std::vector<std::string>& program) {
  std::vector<std::string> argv = {SAFEX_BENCH_BINARY,
                                   "run",
                                   "--policy",
                                   WorkDir() + "/native-bench.policy",
                                   "--host-config",
                                   WorkDir() + "/host.policy",
                                   "--audit-db",
                                   WorkDir() + "/audit.db",
                                   "--audit-key",
                                   WorkDir() + "/audit.key",
                                   "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  return bench::TimedRun(argv);
}

Result<double> Driver(drivers::NativeDriver& d, const plan::Plan& p,
                      const std::vector<std::string>& program, int n) {
  drivers::RunRequest req;
  req.run_id = "bench-" + std::to_string(getpid()) + "-" + std::to_string(n);
  req.argv = program;
  auto t0 = Clock::now();
  SAFEX_ASSIGN_OR_RETURN(drivers::RunResult r, d.Run(p, req));
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (r.exit_code != 0) return Status::Internal("driver run exited " + std::to_string(r.exit_code));
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  if (access("/usr/bin/bwrap", X_OK) != 0) {
    std::fprintf(stderr, "native_bench: /usr/bin/bwrap is missing (apt-get install bubblewrap)\n");
    return 1;
  }
  mkdir(WorkDir().c_str(), 0700);
  std::ofstream(WorkDir() + "/native-bench.policy") << kPolicy;
  std::ofstream(WorkDir() + "/host.policy") << "host {\n  backends {\n    native { }\n  }\n}\n";
  drivers::NativeDriver driver;
  if (Status st = driver.Probe(); !st.ok()) {
    std::fprintf(stderr, "native: %s\n", st.ToString().c_str());
    return 1;
  }
  const plan::Plan plan = NativePlan();
  struct Case {
    const char* name;
    std::vector<std::string> argv;
    std::vector<double> bwrap, unshare, driver, safex;
  };
  std::vector<Case> cases = {{"/bin/true", {"/bin/true"}, {}, {}, {}, {}},
                             {"python3 -c pass", {"python3", "-c", "pass"}, {}, {}, {}, {}}};
  int n = 0;
  for (int i = 0; i < runs; ++i) {
    for (Case& c : cases) {
      auto b = Bwrap(c.argv);
      auto u = Unshare(c.argv);
      auto d = Driver(driver, plan, c.argv, n++);
      auto s = SafexRun(c.argv);
      for (const Result<double>* r : {&b, &u, &d, &s}) {
        if (!r->ok()) {
          std::fprintf(stderr, "run failed: %s\n", r->status().ToString().c_str());
          return 1;
        }
      }
      c.bwrap.push_back(*b);
      c.unshare.push_back(*u);
      c.driver.push_back(*d);
      c.safex.push_back(*s);
    }
  }
  std::printf("native_bench: %d runs per case, median wall ms (ratios against bwrap)\n", runs);
  std::printf("%-16s %9s %9s %9s %9s %13s %13s\n", "program", "bwrap", "unshare", "driver",
              "safex run", "driver/bwrap", "safex/bwrap");
  for (Case& c : cases) {
    const double b = bench::Median(c.bwrap), d = bench::Median(c.driver);
    const double s = bench::Median(c.safex);
    std::printf("%-16s %9.1f %9.1f %9.1f %9.1f %12.2fx %12.2fx\n", c.name, b,
                bench::Median(c.unshare), d, s, d / b, s / b);
  }
  std::printf("\nruns per second, /bin/true, %d runs per point\n", 2 * runs);
  std::printf("%-12s %12s %12s\n", "concurrency", "bwrap", "safex run");
  for (int k : {1, 2, 4}) {
    const double b = bench::Throughput(k, 2 * runs, [](int, int) { return Bwrap({"/bin/true"}); });
    const double s =
        bench::Throughput(k, 2 * runs, [](int, int) { return SafexRun({"/bin/true"}); });
    std::printf("%-12d %12.2f %12.2f\n", k, b, s);
  }
  SpawnOptions so;
  so.argv = {"/bin/rm", "-rf", WorkDir()};
  if (auto p = Subprocess::Spawn(so); p.ok()) (void)p->Wait();
  return 0;
}
