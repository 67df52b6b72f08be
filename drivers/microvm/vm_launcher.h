// Starts one QEMU process for a VmConfig, runs the session with its guest (vm_session.h) and always
// kills and reaps QEMU when the session ends: no VMM outlives its LiveVm.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "drivers/microvm/qemu_command.h"
#include "drivers/microvm/vm_session.h"

namespace safex::microvm {

struct LaunchSpec {
  // ctl_fd, console_fd, disks[].fd and tap_fd are filled in by LaunchAndRun (child-side numbers).
  VmConfig vm;
  std::vector<int> disk_fds;  // the caller's O_RDONLY fds, one per vm.disks entry
  std::optional<int> tap_fd;  // the caller's tap fd (egress only)
  uid_t uid = 65534;          // the VMM's credentials
  gid_t gid = 65534;
  std::vector<gid_t> groups;
  int netns_fd = -1;
  std::vector<std::string> cgroup_procs_files;
};

struct LaunchResult {
  SessionResult session;
  ExitStatus vmm;
  std::vector<std::string> argv;          // the command line used (for diagnostics)
  std::chrono::nanoseconds vmm_start{0};  // spawning QEMU until its execve
};

// A started QEMU and the host's ends of its channel, console and stderr (the warm pool keeps one
// booted guest waiting between LaunchVm and FinishVm). Destroying it kills and reaps QEMU.
struct LiveVm {
  Subprocess vmm;
  UniqueFd ctl, console, err;
  std::vector<std::string> argv;
  std::chrono::nanoseconds vmm_start{0};
};

// Non-ok when QEMU could not be started (nothing booted).
Result<LiveVm> LaunchVm(LaunchSpec spec);
// The session with the guest (vm_session.h) on `vm`, then QEMU killed and reaped.
LaunchResult FinishVm(LiveVm& vm, const SessionConfig& session);
// LaunchVm, then FinishVm: one cold run.
Result<LaunchResult> LaunchAndRun(LaunchSpec spec, const SessionConfig& session);

}  // namespace safex::microvm
