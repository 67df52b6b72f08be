// A plan's syscall rules as a finished seccomp BPF program, built with libseccomp before the
// sandbox's process is cloned (the child then only installs it: no allocation after clone). The
// native backend and the microVM's guest agent build their filters here, so one syscall rule
// means the same on both; gVisor gets the same rules as OCI `linux.seccomp` (gvisor/oci_spec.h).
//
// Besides the rules, every syscall of a foreign ABI (32-bit `int 0x80`, x32) kills the process:
// the filter knows only the native x86_64 ABI, and libseccomp's bad-arch action is KILL_PROCESS.
// No no_new_privs attribute is set: the process that installs the program sets it itself, right
// before. Standard library and libseccomp only (the guest agent links it statically).
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace safex::drivers {

enum class BpfAction { kAllow, kErrno, kKill, kLog };

struct BpfRule {
  std::string name;  // a syscall name libseccomp knows for x86_64
  BpfAction action = BpfAction::kErrno;
  int32_t errno_value = 1;  // kErrno: 1..4095
};

struct BpfPolicy {
  BpfAction default_action = BpfAction::kAllow;
  int32_t default_errno = 1;
  std::vector<BpfRule> rules;
};

// The program, or nullopt with *error saying why (an unknown syscall name, an errno out of range,
// libseccomp's own failure). Bounded: at most 1 MiB of instructions.
std::optional<std::vector<sock_filter>> BuildSeccompBpf(const BpfPolicy& policy,
                                                        std::string* error);

}  // namespace safex::drivers
