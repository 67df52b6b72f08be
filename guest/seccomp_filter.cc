#include "guest/seccomp_filter.h"

#include "drivers/seccomp_bpf.h"

namespace safex::guest {
namespace {

drivers::BpfAction ToBpf(microvm::GuestSyscallAction a) {
  switch (a) {
    case microvm::GuestSyscallAction::kAllow:
      return drivers::BpfAction::kAllow;
    case microvm::GuestSyscallAction::kErrno:
      return drivers::BpfAction::kErrno;
    case microvm::GuestSyscallAction::kKill:
      return drivers::BpfAction::kKill;
    case microvm::GuestSyscallAction::kLog:
      return drivers::BpfAction::kLog;
  }
  return drivers::BpfAction::kKill;
}

}  // namespace

std::optional<std::vector<sock_filter>> BuildSeccompProgram(const microvm::GuestSpec& spec,
                                                            std::string* error) {
  drivers::BpfPolicy p;
  p.default_action = ToBpf(spec.seccomp_default);
  p.default_errno = spec.seccomp_default_errno;
  for (const microvm::GuestSyscallRule& r : spec.seccomp_rules) {
    p.rules.push_back({r.name, ToBpf(r.action), r.errno_value});
  }
  return drivers::BuildSeccompBpf(p, error);
}

}  // namespace safex::guest
