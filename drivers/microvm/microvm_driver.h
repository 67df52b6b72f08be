// MicrovmDriver: runs each request in a fresh QEMU `-M microvm` guest (the Firecracker/Kata model)
// and destroys it afterwards. The same plan means the same thing as under gVisor: every limit,
// mount and syscall rule is enforced inside the guest by the agent (guest/), and the VM boundary,
// the VMM's host cgroup and the supervisor's deadlines hold even if the guest is compromised.
//
// Per run:
//   <state_root>/images/<key>.erofs   the read-only image of the plan's bind sources (cached,
//                                     rootfs_image.h); passed to QEMU as an fd
//   <state_root>/runs/<run-id>/       private 0700 directory: the input image (if any) and
//                                     owner.lock, flock'ed by the running supervisor for the whole
//                                     run (CleanupStale leaves runs whose lock is held alone)
//   cgroup <cgroup_parent>/microvm-<run-id> in every hierarchy: the VMM's memory (guest RAM +
//                                     overhead), pids and CPU (vcpus)
//   one QEMU process, started as a per-run unprivileged uid (common/subprocess.h), its seccomp
//   sandbox on one detached host tmpfs per kOutput mount, filled from the guest's output stream
//                                     (output_receiver.h), handed to request.collect_output after
//                                     QEMU is gone
// Wall time is the supervisor's: from the agent's kStarted, QEMU is killed at the deadline. The
// boot (kernel + agent setup) has its own deadline (boot_timeout); a guest that hangs there is
// killed and the run refused ("the guest did not boot"). RunRequest::cancel is honoured in every
// phase (checked every 20 ms): the VMM is killed, everything torn down, the result `interrupted`.
// See docs/microvm.md.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"
#include "drivers/driver.h"
#include "drivers/net/network_provider.h"
#include "plan/backend_settings.h"
#include "plan/plan.h"

namespace safex::microvm {
enum class Accel;  // qemu_command.h
}  // namespace safex::microvm

namespace safex::drivers {

// Where the time of one run went (host clock unless noted), for benchmarks and diagnostics.
struct MicrovmRunTimings {
  std::chrono::nanoseconds total{0};              // Run() entry to return
  std::chrono::nanoseconds prepare{0};            // before QEMU starts: images, spec, cgroup, tmpfs
  std::chrono::nanoseconds image_fingerprint{0};  // part of prepare: walking the bind sources
  std::chrono::nanoseconds image_build{0};    // part of prepare: building the image (cache miss)
  std::chrono::nanoseconds vmm_start{0};      // spawning QEMU (until its execve)
  std::chrono::nanoseconds to_hello{0};       // QEMU start -> the agent's kHello
  std::chrono::nanoseconds guest_kernel{0};   // guest clock: kernel start -> agent start
  std::chrono::nanoseconds guest_modules{0};  // guest clock: module loading + finding the port
  std::chrono::nanoseconds setup{0};          // kHello -> kStarted (spec, mounts, cgroup, exec)
  std::chrono::nanoseconds program{0};        // kStarted -> kExit
  std::chrono::nanoseconds outputs{0};        // kExit -> kOutputsDone
  std::chrono::nanoseconds teardown{0};       // session end -> return (kill, cgroup, files)
};

struct MicrovmOptions {
  // Defaults: the host config's (plan/backend_settings.h), so each default is written once.
  std::string qemu_path = plan::MicrovmBackendSettings().qemu;
  std::string kernel_path = plan::MicrovmBackendSettings().kernel;
  std::string initramfs_path = plan::MicrovmBackendSettings().initramfs;
  std::string mkfs_erofs_path = "/usr/bin/mkfs.erofs";
  // Image cache, per-run directories, the KVM probe cache.
  std::string state_root = plan::MicrovmBackendSettings().state_root;
  // The operator's KVM policy: auto (KVM when the probe says it works, TCG otherwise), require
  // (no usable KVM: every run refused), never (TCG always; no probe).
  plan::KvmMode kvm = plan::KvmMode::kAuto;
  // TCG is not a security boundary: without usable KVM, plans for untrusted code are refused
  // unless this is set (test hosts only; plan/backend_settings.h).
  bool tcg_for_untrusted = false;
  std::chrono::milliseconds kvm_probe_timeout{5000};
  // From QEMU's start to the agent's kStarted (kernel boot + modules + mounts). TCG on a loaded
  // 2-core host can take well over 10 s.
  std::chrono::milliseconds boot_timeout{60000};
  // From the program's exit to the end of the output stream.
  std::chrono::milliseconds collect_timeout{60000};
  // Guest RAM = the plan's memory limit + this (kernel, agent, page cache of the images).
  uint64_t guest_overhead_bytes = 160ull << 20;
  // The VMM's host cgroup memory limit = guest RAM + this (QEMU itself, the TCG cache).
  uint64_t vmm_overhead_bytes = 320ull << 20;
  uint32_t tcg_tb_mib = 64;
  // Host cgroup placement of the VMM (cgroup v1 or v2, detected).
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string cgroup_parent = "safex";
  uint64_t vmm_pids = 256;
  // QEMU runs as uid/gid vmm_id_base + (hash of the run id mod vmm_id_count): a uid no other run
  // (probably) shares and no account owns. 0 count: always vmm_id_base.
  uint32_t vmm_id_base = 0x5afe0000;
  uint32_t vmm_id_count = 65536;
  size_t max_stdin_bytes = 64ull << 20;
  // Rootfs image cache (one image per bind root): least recently used images beyond either bound
  // are removed. A full /usr of a build host is several GiB.
  size_t image_cache_max = 8;
  uint64_t image_cache_max_bytes = 24ull << 30;
  // Called at the end of every run that booted a guest (benchmarks).
  std::function<void(const MicrovmRunTimings&)> timings_observer;
  // Called when the guest reports that the program started (kStarted), with the run id, on the
  // run's thread (tests: cancel or crash a run that is known to be running).
  std::function<void(const std::string& run_id)> started_observer;
  // Required for plans that grant egress (runs with egress are refused without it): the run's
  // network namespace (QEMU starts inside it), whose link the guest takes over through a tap
  // (guest_tap.h).
  net::NetworkProvider network_provider;
};

class MicrovmDriver : public Driver {
 public:
  explicit MicrovmDriver(MicrovmOptions options = {});
  ~MicrovmDriver() override;

  const char* name() const override { return "microvm"; }

  // QEMU, kernel, initramfs and mkfs.erofs present; cgroups usable; state_root writable; the
  // host's TSC frequency measured; KVM probed unless kvm = never (with the deadline; cached for
  // the host's boot). Unavailable with the reason otherwise, including kvm = require without KVM.
  Status Probe() override;
  // A pooled VM's run: QEMU's binary still there, while a full probe has passed since the last
  // failure (no TSC measurement, no QEMU start); a full probe otherwise.
  Status ProbeForMadeSandbox() override;

  // Besides the common checks: without usable KVM (once probed), a plan for untrusted code is
  // refused unless tcg_for_untrusted (TcgAdmits).
  Status CheckRequest(const plan::Plan& plan, const RunRequest& request) const override;

  Result<RunResult> Run(const plan::Plan& plan, const RunRequest& request) override;

  // The warm pool (drivers/driver.h; microvm/pooled_vm.h): a VM booted until its agent's kHello,
  // waiting for the spec, so the kernel boot is off the request's path. A pooled VM cannot take
  // an input directory (the input is a disk attached when QEMU starts): RunPrepared refuses one,
  // and its TakesInput says so to the pool.
  Result<std::unique_ptr<PreparedSandbox>> Prepare(const plan::Plan& plan,
                                                   const PrepareRequest& request) override;
  Result<RunResult> RunPrepared(std::unique_ptr<PreparedSandbox> sandbox, const plan::Plan& plan,
                                const RunRequest& request) override;
  std::string SandboxGeneration(const plan::Plan& plan) override;
  // The VMM cgroup's memory limit: guest RAM and QEMU's own allowance.
  uint64_t SandboxMemoryBytes(const plan::Plan& plan) const override;

  // Crash recovery (the daemon calls it at start; needs no Probe and no QEMU): removes what runs
  // of a supervisor that died left behind under state_root: every process still in the run's VMM
  // cgroup (QEMU; normally already gone through its parent-death signal) is killed, the cgroup
  // removed in every hierarchy, then <state_root>/runs/<run-id>. A run whose owner.lock is held
  // (a live supervisor) is left alone; a run directory without a lock file (a crash between
  // mkdir and the lock, or a run of an older build) only once it is 10 minutes old and its
  // cgroup holds no process. Also removes image builds a dead process left unfinished
  // (<state_root>/images/<key>.tmp.* and stage.*, when no builder holds <key>.lock). The output
  // tmpfs are detached mounts held only by the supervisor's fds: they died with it. `cleaned`
  // gets the number of run directories (or cgroups without one) removed.
  Status CleanupStale(int* cleaned = nullptr) override;
  // The same for one run whose owner is known to be dead (a durable run record whose lock is
  // free): also removes the cgroup when the run directory is already gone. A run whose
  // owner.lock is held is still left alone; an id no run can have is nothing to clean.
  // `cleaned`: something was removed.
  Status CleanupStaleRun(const std::string& run_id, bool* cleaned = nullptr) override;

  // After Probe: whether KVM is usable here and why (the probe's detail).
  std::optional<bool> kvm_usable() const;
  std::string kvm_detail() const;

 private:
  struct Ready;
  Result<std::shared_ptr<const Ready>> EnsureReady();
  Status ProbeFully();                 // Probe's checks; sets ready_ when they pass
  void HostFacts(Ready* ready) const;  // its QEMU version and TSC rate, measured or kept
  Status TcgAdmits(const plan::Plan& plan, bool tcg, const std::string& kvm_detail) const;
  // Run's refusals before anything exists (CheckRun, TcgAdmits); the accelerator otherwise.
  Result<microvm::Accel> Admit(const plan::Plan& plan, const RunRequest& req,
                               const Ready& ready) const;

  MicrovmOptions options_;
  mutable std::mutex mu_;
  // Guarded by mu_; each Ready immutable once set, replaced whole by a later Probe (a run keeps
  // the one it started with).
  std::shared_ptr<const Ready> ready_;
};

}  // namespace safex::drivers
