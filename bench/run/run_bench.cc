// `safex run` versus a bare `runsc run` of an equivalent bundle (the same plan's OCI spec, mounts,
// seccomp rules and limits), for /bin/true and `python3 -c pass`, interleaved so that machine load
// affects both alike. Then runs per second of each at concurrency 1, 2 and 4.
//
// safex run is the whole CLI as a user runs it: compile the policy, verify the plan again, open the
// audit log (a real file, synchronous=FULL), record start, make the sandbox (private dir, cgroups,
// bundle), run, validate the output, tear down, record end.
//
//   sudo build/bench/run/run_bench [runs-per-case [BASELINE [POLICY]]]      (default 20)
//
// BASELINE: another build's `safex` binary (e.g. the last release), run interleaved with this
// one against its own audit log, so "no slowdown" is a ratio measured under the same load.
// POLICY (default policies/examples/python-untrusted.policy): one both binaries can compile, e.g.
// the release's own copy of the examples when the language has grown since.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_util.h"
#include "bench/gvisor/raw_runsc.h"
#include "common/fs_tree.h"
#include "common/unique_fd.h"
#include "compiler/compiler.h"

namespace {

using namespace safex;
using Clock = std::chrono::steady_clock;

std::string kPolicy =
    std::string(SAFEX_BENCH_SOURCE_DIR) + "/policies/examples/python-untrusted.policy";

std::string AuditDir() { return "/var/tmp/safex-run-bench-" + std::to_string(getpid()); }

// The audit logs and scratch directories go on every way out, a failed run's too.
struct AuditDirRemover {
  ~AuditDirRemover() {
    if (Status st = RemoveTree(AuditDir()); !st.ok()) {
      std::fprintf(stderr, "run_bench: %s\n", st.ToString().c_str());
    }
  }
};

Result<double> SafexRun(const std::vector<std::string>& program,
                        const std::string& binary = SAFEX_BENCH_BINARY,
                        const std::string& log = "audit") {
  std::vector<std::string> argv = {binary,        "run",
                                   "--policy",    kPolicy,
                                   "--audit-db",  AuditDir() + "/" + log + ".db",
                                   "--audit-key", AuditDir() + "/" + log + ".key",
                                   "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  return bench::TimedRun(argv);
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  const std::string baseline = argc > 2 ? argv[2] : "";
  if (argc > 3) kPolicy = argv[3];
  mkdir(AuditDir().c_str(), 0700);
  AuditDirRemover remove_audit_dir;

  compiler::CompileOptions co;
  compiler::CompileResult compiled = compiler::CompileFile(kPolicy, co);
  if (!compiled.ok()) {
    std::fprintf(stderr, "%s", compiler::RenderAll(compiled).c_str());
    return 1;
  }
  // The bare bundle gets plain directories where the driver makes a snapshot (input) or a host
  // tmpfs (output); everything else of the plan is the same.
  plan::Plan plan = *compiled.plan;
  struct Case {
    const char* name;
    std::vector<std::string> argv;
    bench::RawBundle bundle;
    std::vector<double> raw, safex, base;
  };
  std::vector<Case> cases;
  cases.push_back({"/bin/true", {"/bin/true"}, {}, {}, {}, {}});
  cases.push_back({"python3 -c pass", {"python3", "-c", "pass"}, {}, {}, {}, {}});
  std::string scratch = AuditDir() + "/dirs";
  mkdir(scratch.c_str(), 0755);
  plan = bench::WithPlainDirs(plan, scratch);
  for (size_t c = 0; c < cases.size(); ++c) {
    if (Status st = cases[c].bundle.Make(plan, cases[c].argv, "run" + std::to_string(c));
        !st.ok()) {
      std::fprintf(stderr, "bundle: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  int n = 0;
  for (int i = 0; i < runs; ++i) {
    for (Case& c : cases) {
      auto raw = bench::RawRun(c.bundle, n++, false);
      auto sx = SafexRun(c.argv);
      if (!raw.ok() || !sx.ok()) {
        std::fprintf(stderr, "run failed: %s / %s\n", raw.status().ToString().c_str(),
                     sx.status().ToString().c_str());
        return 1;
      }
      c.raw.push_back(*raw);
      c.safex.push_back(*sx);
      if (baseline.empty()) continue;
      auto base = SafexRun(c.argv, baseline, "baseline");
      if (!base.ok()) {
        std::fprintf(stderr, "baseline run failed: %s\n", base.status().ToString().c_str());
        return 1;
      }
      c.base.push_back(*base);
    }
  }
  std::printf("run_bench: %d runs per case, policy python-untrusted, median wall ms\n", runs);
  std::printf("%-18s %12s %12s %10s\n", "program", "runsc run", "safex run", "ratio");
  for (Case& c : cases) {
    double raw = bench::Median(c.raw), sx = bench::Median(c.safex);
    std::printf("%-18s %12.1f %12.1f %9.2fx\n", c.name, raw, sx, sx / raw);
  }
  if (!baseline.empty()) {
    std::printf("\nagainst the baseline %s, median wall ms\n", baseline.c_str());
    std::printf("%-18s %12s %12s %10s\n", "program", "baseline", "this build", "ratio");
    for (Case& c : cases) {
      double base = bench::Median(c.base), sx = bench::Median(c.safex);
      std::printf("%-18s %12.1f %12.1f %9.2fx\n", c.name, base, sx, sx / base);
    }
  }
  std::printf("\nruns per second, /bin/true, %d runs per point\n", 2 * runs);
  std::printf("%-12s %12s %12s\n", "concurrency", "runsc run", "safex run");
  // One bundle per concurrent slot: the spec names its cgroup, and two live containers cannot
  // share one (safex gives every run its own).
  std::vector<bench::RawBundle> slots(4);
  for (size_t t = 0; t < slots.size(); ++t) {
    if (Status st = slots[t].Make(plan, {"/bin/true"}, "slot" + std::to_string(t)); !st.ok()) {
      std::fprintf(stderr, "bundle: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  for (int k : {1, 2, 4}) {
    std::atomic<int> id{100000 * k};
    double raw = bench::Throughput(k, 2 * runs, [&](int t, int) {
      return bench::RawRun(slots[static_cast<size_t>(t)], id.fetch_add(1), false);
    });
    double sx = bench::Throughput(k, 2 * runs, [&](int, int) { return SafexRun({"/bin/true"}); });
    std::printf("%-12d %12.2f %12.2f\n", k, raw, sx);
  }
  return 0;
}
