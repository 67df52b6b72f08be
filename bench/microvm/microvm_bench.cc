// microvm_bench: boot-to-exit time of `/bin/true` in a microVM and the share of it spent in the
// guest kernel's boot versus the supervisor's own work.
//
// Cases:
//   busybox    the plan binds only /bin/busybox (a tiny cached image): `busybox true`
//   probe      QEMU + kernel + agent to kHello only (safex.mode=probe): the bare boot
//   standard   (--standard-binds) /usr, /lib, /lib64, /bin read-only, /tmp: `/bin/true`; the
//              first run may build the /usr image (reported separately), later runs walk /usr to
//              check the cache (the fingerprint)
// For each case: the median over `runs` of every phase (MicrovmRunTimings).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/common/bench_plan.h"
#include "drivers/microvm/host_tsc.h"
#include "drivers/microvm/microvm_driver.h"
#include "drivers/microvm/vm_launcher.h"

namespace {

using safex::drivers::MicrovmDriver;
using safex::drivers::MicrovmOptions;
using safex::drivers::MicrovmRunTimings;
using Ns = std::chrono::nanoseconds;

double Ms(Ns d) { return static_cast<double>(d.count()) / 1e6; }

Ns Median(std::vector<Ns> v) {
  if (v.empty()) return Ns(0);
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void PrintRow(const char* name, const std::vector<MicrovmRunTimings>& ts,
              Ns MicrovmRunTimings::*field) {
  std::vector<Ns> v;
  for (const auto& t : ts) v.push_back(t.*field);
  std::printf("  %-34s %9.1f ms\n", name, Ms(Median(v)));
}

void Report(const char* title, const std::vector<MicrovmRunTimings>& ts) {
  std::printf("\n%s (median of %zu)\n", title, ts.size());
  if (ts.empty()) return;
  PrintRow("total (Run entry -> return)", ts, &MicrovmRunTimings::total);
  PrintRow("  prepare (before QEMU)", ts, &MicrovmRunTimings::prepare);
  PrintRow("    of which image fingerprint", ts, &MicrovmRunTimings::image_fingerprint);
  PrintRow("    of which image build", ts, &MicrovmRunTimings::image_build);
  PrintRow("  QEMU spawn (to execve)", ts, &MicrovmRunTimings::vmm_start);
  PrintRow("  QEMU start -> agent hello", ts, &MicrovmRunTimings::to_hello);
  PrintRow("    guest: kernel boot (guest clock)", ts, &MicrovmRunTimings::guest_kernel);
  PrintRow("    guest: modules + port (guest clock)", ts, &MicrovmRunTimings::guest_modules);
  PrintRow("  hello -> started (agent setup)", ts, &MicrovmRunTimings::setup);
  PrintRow("  started -> exit (the program)", ts, &MicrovmRunTimings::program);
  PrintRow("  exit -> outputs done", ts, &MicrovmRunTimings::outputs);
  PrintRow("  teardown (kill, cgroup, files)", ts, &MicrovmRunTimings::teardown);
  std::vector<Ns> kernel, host;
  for (const auto& t : ts) {
    kernel.push_back(t.guest_kernel);
    // The supervisor's own work: everything but the guest's boot, setup and the program.
    host.push_back(t.prepare + t.vmm_start + t.teardown);
  }
  double total = Ms(Median([&] {
    std::vector<Ns> v;
    for (const auto& t : ts) v.push_back(t.total);
    return v;
  }()));
  std::printf(
      "  share: guest kernel boot %.0f%%, supervisor work (prepare+spawn+teardown) %.0f%%\n",
      100.0 * Ms(Median(kernel)) / total, 100.0 * Ms(Median(host)) / total);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  bool standard = false;
  std::string initramfs = std::string(SAFEX_BENCH_BUILD_DIR) + "/guest/initramfs.cpio";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--standard-binds") == 0) {
      standard = true;
    } else if (std::strcmp(argv[i], "--initramfs") == 0 && i + 1 < argc) {
      initramfs = argv[++i];
    } else {
      runs = std::max(1, std::atoi(argv[i]));
    }
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "microvm_bench: needs root\n");
    return 2;
  }
  std::vector<MicrovmRunTimings> collected;
  MicrovmOptions o;
  o.initramfs_path = initramfs;
  // The production cache (default state_root): the standard image is shared with `safex run`.
  o.kvm = safex::plan::KvmMode::kNever;  // TCG: KVM hangs on the build machine
  o.tcg_for_untrusted = true;            // a benchmark host opts in (plan/backend_settings.h)
  o.timings_observer = [&](const MicrovmRunTimings& t) { collected.push_back(t); };
  MicrovmDriver driver(o);
  if (auto st = driver.Probe(); !st.ok()) {
    std::fprintf(stderr, "microvm_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("microvm_bench: %d runs per case, TCG, host TSC %llu kHz, initramfs %s\n", runs,
              static_cast<unsigned long long>(safex::microvm::MeasureHostTscKhz()),
              initramfs.c_str());

  auto run_case = [&](const char* title, const safex::plan::Plan& p,
                      const std::vector<std::string>& args, int n) {
    collected.clear();
    for (int i = 0; i < n; ++i) {
      safex::drivers::RunRequest req;
      req.run_id = "bench-" + std::to_string(getpid()) + "-" + std::to_string(i) + "-" +
                   std::to_string(collected.size()) + "-" + std::to_string(std::rand() % 100000);
      req.argv = args;
      auto r = driver.Run(p, req);
      if (!r.ok() || r->exit_code != 0) {
        std::fprintf(stderr, "run failed: %s\n",
                     r.ok() ? r->backend_error.c_str() : r.status().ToString().c_str());
        return;
      }
    }
    Report(title, collected);
  };

  safex::plan::Plan bb = safex::bench::BenchPlan(safex::plan::Backend::kMicrovm);
  bb.mounts.push_back(safex::bench::Bind("/bin/busybox"));
  run_case("busybox true (image: /bin/busybox only)", bb, {"/bin/busybox", "true"}, runs);

  // The bare boot: QEMU to the agent's hello, nothing else.
  {
    std::vector<Ns> hello;
    for (int i = 0; i < runs; ++i) {
      safex::microvm::LaunchSpec s;
      s.vm.qemu_path = o.qemu_path;
      s.vm.kernel_path = o.kernel_path;
      s.vm.initramfs_path = initramfs;
      s.vm.tsc_khz = safex::microvm::MeasureHostTscKhz();
      s.vm.probe = true;
      s.uid = s.gid = o.vmm_id_base;
      safex::microvm::SessionConfig sc;
      auto t0 = std::chrono::steady_clock::now();
      auto r = safex::microvm::LaunchAndRun(s, sc);
      if (r.ok() && r->session.hello) hello.push_back(std::chrono::steady_clock::now() - t0);
    }
    std::printf("\nprobe boot: QEMU spawn -> agent hello -> QEMU killed (median of %zu): %.1f ms\n",
                hello.size(), Ms(Median(hello)));
  }

  if (standard) {
    safex::plan::Plan sp = safex::bench::BenchPlan(safex::plan::Backend::kMicrovm);
    for (const char* p : {"/usr", "/lib", "/lib64", "/bin"})
      sp.mounts.push_back(safex::bench::Bind(p));
    run_case("/bin/true, standard binds (first run may build the image)", sp, {"/bin/true"}, 1);
    run_case("/bin/true, standard binds (cached image)", sp, {"/bin/true"}, runs);
  }
  return 0;
}
