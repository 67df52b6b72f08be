// The plan's syscall rules as a seccomp BPF program, built with libseccomp in the agent before the
// workload is cloned (the child only installs the finished program: no allocation after clone).
// Besides the plan's rules, every syscall of a foreign ABI (32-bit int 0x80, x32) kills the
// process: libseccomp's bad-arch action, and x32 numbers are not native x86_64 syscalls.
#pragma once

#include <linux/filter.h>

#include <optional>
#include <string>
#include <vector>

#include "drivers/microvm/guest_spec.h"

namespace safex::guest {

std::optional<std::vector<sock_filter>> BuildSeccompProgram(const microvm::GuestSpec& spec,
                                                            std::string* error);

}  // namespace safex::guest
