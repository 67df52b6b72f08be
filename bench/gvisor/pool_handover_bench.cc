// pool_handover_bench: where a warm-pool run's time to first byte goes, at the driver, without the
// service. For the plan of policies/examples/python-untrusted.policy, per round (interleaved):
//
//   pooled          GvisorDriver::Prepare (untimed), 1 s of waiting, then RunPrepared of
//                   `/bin/echo hi`: from the call to the first stdout byte on the host
//   pooled, static  the same with a static program (`/bin/busybox echo hi`)
//   pooled, no seccomp   the first again with the plan's syscall rules removed (what the
//                   plan's filter costs the program's start inside the Sentry)
//   raw             a bare `runsc run` of an equivalent bundle, its whole wall time (the anchor)
//
//   sudo build/bench/gvisor/pool_handover_bench [rounds]   (default 10)
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_util.h"
#include "bench/gvisor/raw_runsc.h"
#include "compiler/compiler.h"
#include "drivers/gvisor/gvisor_driver.h"

namespace {

using namespace safex;
using Clock = std::chrono::steady_clock;

// ms from RunPrepared's call to the first stdout byte; an error unless the run exited 0.
Result<double> PooledFirstByte(drivers::GvisorDriver& driver, const plan::Plan& plan,
                               const std::vector<std::string>& argv, const std::string& id) {
  drivers::PrepareRequest preq;
  preq.sandbox_id = id + "-s";
  SAFEX_ASSIGN_OR_RETURN(auto sandbox, driver.Prepare(plan, preq));
  std::this_thread::sleep_for(std::chrono::seconds(1));  // settled, as a waiting sandbox is
  std::atomic<int64_t> first_ns{-1};
  drivers::RunRequest req;
  req.run_id = id;
  req.argv = argv;
  const auto t0 = Clock::now();
  req.on_output = [&](int which, std::string_view) {
    int64_t none = -1;
    if (which == 0) {
      first_ns.compare_exchange_strong(
          none, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    }
  };
  SAFEX_ASSIGN_OR_RETURN(drivers::RunResult r, driver.RunPrepared(std::move(sandbox), plan, req));
  if (r.exit_code != 0 || first_ns < 0) {
    return Status::Internal("pooled run failed: " + r.backend_error);
  }
  return static_cast<double>(first_ns) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
  if (geteuid() != 0) {
    std::fprintf(stderr, "pool_handover_bench: needs root\n");
    return 2;
  }
  const std::string policy =
      std::string(SAFEX_BENCH_SOURCE_DIR) + "/policies/examples/python-untrusted.policy";
  compiler::CompileResult compiled = compiler::CompileFile(policy, {});
  if (!compiled.ok()) {
    std::fprintf(stderr, "%s", compiler::RenderAll(compiled).c_str());
    return 1;
  }
  const plan::Plan plan = *compiled.plan;
  plan::Plan no_rules = plan;
  no_rules.seccomp.rules.clear();
  drivers::GvisorDriver driver;
  if (Status st = driver.Probe(); !st.ok()) {
    std::fprintf(stderr, "pool_handover_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  // The bare bundle gets a plain directory where the driver makes a snapshot (input) or a host
  // tmpfs (output); everything else of the plan is the same.
  char scratch_template[] = "/var/tmp/sxbench-handover-XXXXXX";
  if (mkdtemp(scratch_template) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string scratch = scratch_template;
  struct Remove {
    std::string dir;
    ~Remove() { std::filesystem::remove_all(dir); }
  } remove_scratch{scratch};
  bench::RawBundle bundle;
  if (Status st = bundle.Make(bench::WithPlainDirs(plan, scratch), {"/bin/echo", "hi"}, "handover");
      !st.ok()) {
    std::fprintf(stderr, "bundle: %s\n", st.ToString().c_str());
    return 1;
  }
  struct Case {
    const char* name;
    const plan::Plan* plan;
    std::vector<std::string> argv;
    std::vector<double> ms;
  };
  std::vector<Case> cases = {
      {"pooled /bin/echo", &plan, {"/bin/echo", "hi"}, {}},
      {"pooled busybox echo", &plan, {"/bin/busybox", "echo", "hi"}, {}},
      {"pooled, no syscall rules", &no_rules, {"/bin/echo", "hi"}, {}},
  };
  std::vector<double> raw;
  const std::string tag = std::to_string(getpid());
  for (int i = 0; i < rounds; ++i) {
    auto r = bench::RawRun(bundle, i, false);
    if (!r.ok()) {
      std::fprintf(stderr, "raw run: %s\n", r.status().ToString().c_str());
      return 1;
    }
    raw.push_back(*r);
    for (size_t c = 0; c < cases.size(); ++c) {
      const std::string id = "phb-" + tag + "-" + std::to_string(i) + "-" + std::to_string(c);
      auto ms = PooledFirstByte(driver, *cases[c].plan, cases[c].argv, id);
      if (!ms.ok()) {
        std::fprintf(stderr, "%s: %s\n", cases[c].name, ms.status().ToString().c_str());
        return 1;
      }
      cases[c].ms.push_back(*ms);
    }
  }
  const double anchor = bench::Median(raw);
  std::printf("pool_handover_bench: %d rounds, policy python-untrusted, median ms\n", rounds);
  std::printf("  %-28s %8.1f  1.00x\n", "raw runsc run (whole run)", anchor);
  for (const Case& c : cases) {
    const double m = bench::Median(c.ms);
    std::printf("  %-28s %8.1f  %.2fx\n", c.name, m, m / anchor);
  }
  return 0;
}
