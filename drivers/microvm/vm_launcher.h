// Starts one QEMU process for a VmConfig, runs the session with its guest (vm_session.h) and always
// kills and reaps QEMU before returning: no VMM outlives a call.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"
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

// Non-ok when QEMU could not be started (nothing booted).
Result<LaunchResult> LaunchAndRun(LaunchSpec spec, const SessionConfig& session);

}  // namespace safex::microvm
