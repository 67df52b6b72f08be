// microvm_pool_bench: time to first byte of `echo hi` in a pooled microVM (booted ahead by
// MicrovmDriver::Prepare, waiting at the agent's hello) against a cold microVM run of the same
// plan, interleaved in one run so that load affects both alike. The ratio of the medians is the
// figure (issue 17's goal: at most 0.1x).
//
//   cold     Run() entry -> the first stdout byte (QEMU start, kernel boot, setup, the program)
//   pooled   RunPrepared() entry -> the first stdout byte (setup and the program; the VM booted
//            before, untimed, and waited 1 s)
//
//   sudo build/bench/microvm/microvm_pool_bench [runs] [--standard-binds]   (default 10)
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_plan.h"
#include "drivers/microvm/microvm_driver.h"

namespace {

using safex::drivers::MicrovmDriver;
using safex::drivers::MicrovmOptions;
using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

safex::plan::Plan BenchPlan(bool standard) {
  safex::plan::Plan p = safex::bench::BenchPlan(safex::plan::Backend::kMicrovm);
  p.policy_name = "pool-bench";
  p.process.uid = 65534;
  p.process.gid = 65534;
  const std::vector<std::string> binds =
      standard ? std::vector<std::string>{"/usr", "/lib", "/lib64", "/bin"}
               : std::vector<std::string>{"/bin/busybox"};
  for (const std::string& d : binds) p.mounts.push_back(safex::bench::Bind(d));
  return p;
}

// One request whose first stdout byte is timed from `t0`.
struct Timed {
  safex::drivers::RunRequest req;
  std::atomic<int64_t> first_ns{-1};
  Clock::time_point t0;
};

void Arm(Timed& t, const std::string& id, bool standard) {
  t.req.run_id = id;
  t.req.argv = standard ? std::vector<std::string>{"/bin/echo", "hi"}
                        : std::vector<std::string>{"/bin/busybox", "echo", "hi"};
  t.req.on_output = [&t](int which, std::string_view) {
    int64_t none = -1;
    if (which == 0) {
      t.first_ns.compare_exchange_strong(
          none, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t.t0).count());
    }
  };
  t.t0 = Clock::now();
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 10;
  bool standard = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--standard-binds") == 0) {
      standard = true;
    } else {
      runs = std::max(1, std::atoi(argv[i]));
    }
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "microvm_pool_bench: needs root\n");
    return 2;
  }
  MicrovmOptions o;
  o.kvm = safex::plan::KvmMode::kNever;  // TCG: KVM hangs on the build machine
  o.tcg_for_untrusted = true;
  MicrovmDriver driver(o);
  if (auto st = driver.Probe(); !st.ok()) {
    std::fprintf(stderr, "microvm_pool_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  const safex::plan::Plan plan = BenchPlan(standard);
  const std::string tag = std::to_string(getpid());
  std::vector<double> cold, pooled;
  for (int i = 0; i < runs; ++i) {
    Timed c;
    Arm(c, "mvpb-" + tag + "-c" + std::to_string(i), standard);
    auto r = driver.Run(plan, c.req);
    if (!r.ok() || r->exit_code != 0 || c.first_ns < 0) {
      std::fprintf(stderr, "cold run failed: %s\n",
                   r.ok() ? r->backend_error.c_str() : r.status().ToString().c_str());
      return 1;
    }
    cold.push_back(static_cast<double>(c.first_ns) / 1e6);

    safex::drivers::PrepareRequest preq;
    preq.sandbox_id = "mvpb-" + tag + "-s" + std::to_string(i);
    auto sb = driver.Prepare(plan, preq);
    if (!sb.ok()) {
      std::fprintf(stderr, "prepare failed: %s\n", sb.status().ToString().c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));  // settled, as a waiting VM would be
    Timed p;
    Arm(p, "mvpb-" + tag + "-p" + std::to_string(i), standard);
    auto pr = driver.RunPrepared(std::move(sb).value(), plan, p.req);
    if (!pr.ok() || pr->exit_code != 0 || p.first_ns < 0) {
      std::fprintf(stderr, "pooled run failed: %s\n",
                   pr.ok() ? pr->backend_error.c_str() : pr.status().ToString().c_str());
      return 1;
    }
    pooled.push_back(static_cast<double>(p.first_ns) / 1e6);
  }
  const double c50 = Percentile(cold, 0.5), p50 = Percentile(pooled, 0.5);
  std::printf("microvm_pool_bench: %d runs each, TCG, %s, time to first stdout byte (ms)\n", runs,
              standard ? "standard binds (/usr, /lib, /lib64, /bin)" : "busybox only");
  std::printf("  cold microVM run      p50 %8.1f  p99 %8.1f\n", c50, Percentile(cold, 0.99));
  std::printf("  pooled microVM        p50 %8.1f  p99 %8.1f\n", p50, Percentile(pooled, 0.99));
  std::printf("  ratio pooled/cold p50 %.3fx (goal <= 0.1x)\n", c50 > 0 ? p50 / c50 : 0.0);
  return 0;
}
