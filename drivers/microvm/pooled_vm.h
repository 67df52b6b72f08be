// A microVM of the warm pool (drivers/driver.h, PreparedSandbox): made by MicrovmDriver::Prepare
// through a cold run's steps 1-5b (run_steps.h), its QEMU started, its guest booted and sent the
// plan's part of the spec (GuestSpec::request_later), which the agent sets up (its root, network,
// cgroup, the workload's mounts, the seccomp program) before it says kSetUp and waits for the
// request. That wait is the whole point: the kernel boot, module loading and the plan's setup
// (seconds under TCG) are done before any request exists, and nothing of a request has entered
// the VM. RunPrepared resumes the session with the request (argv, stdin; vm_session.h,
// SessionConfig::request_payload); from there it is a cold run's session.
// Destroying it unused kills and reaps QEMU, then removes what the steps made.
#pragma once

#include <string>
#include <utility>

#include "drivers/driver.h"
#include "drivers/microvm/guest_spec.h"
#include "drivers/microvm/run_steps.h"
#include "drivers/microvm/vm_launcher.h"

namespace safex::microvm {

class PooledVm final : public drivers::PreparedSandbox {
 public:
  PooledVm(std::string id, std::string plan_digest, std::string generation, int64_t created_ns,
           VmRun run, LiveVm vm, Hello hello, Accel accel, std::string mode,
           drivers::Enforcement evidence)
      : PreparedSandbox(std::move(id), std::move(plan_digest), std::move(generation), created_ns),
        run_(std::move(run)),
        vm_(std::move(vm)),
        hello_(std::move(hello)),
        accel_(accel),
        mode_(std::move(mode)) {
    enforcement_ = std::move(evidence);
  }

  // QEMU alive, the waiting agent silent on the channel; the console and QEMU's stderr drained.
  bool Healthy() override {
    return WaitingGuestHealthy(vm_.ctl.get(), vm_.console.get(), vm_.err.get(), vm_.vmm.pidfd());
  }

  // Its input is a disk attached when QEMU started (none for a pooled VM).
  bool TakesInput() const override { return false; }

  VmRun& run() { return run_; }
  LiveVm& vm() { return vm_; }
  const Hello& hello() const { return hello_; }
  Accel accel() const { return accel_; }
  const std::string& mode() const { return mode_; }

 private:
  // Declared first, destroyed last: QEMU (vm_) is killed and reaped before its cgroup, network
  // and directory go.
  VmRun run_;
  LiveVm vm_;
  Hello hello_;
  Accel accel_;
  std::string mode_;
};

}  // namespace safex::microvm
