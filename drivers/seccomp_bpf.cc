#include "drivers/seccomp_bpf.h"

#include <seccomp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace safex::drivers {
namespace {

uint32_t ToAction(BpfAction a, int32_t errno_value) {
  switch (a) {
    case BpfAction::kAllow:
      return SCMP_ACT_ALLOW;
    case BpfAction::kErrno:
      return SCMP_ACT_ERRNO(static_cast<uint16_t>(errno_value));
    case BpfAction::kKill:
      return SCMP_ACT_KILL_PROCESS;
    case BpfAction::kLog:
      return SCMP_ACT_LOG;
  }
  return SCMP_ACT_KILL_PROCESS;
}

bool ValidErrno(int32_t e) { return e > 0 && e < 4096; }

// libseccomp 2.5 exports only to an fd: go through a memfd.
std::optional<std::vector<sock_filter>> Export(scmp_filter_ctx ctx, std::string* error) {
  int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
  if (fd < 0) {
    *error = std::string("memfd_create: ") + std::strerror(errno);
    return std::nullopt;
  }
  const int rc = seccomp_export_bpf(ctx, fd);
  const off_t size = lseek(fd, 0, SEEK_END);
  if (rc != 0 || size <= 0 || size % sizeof(sock_filter) != 0 || size > 1024 * 1024) {
    close(fd);
    *error = "seccomp_export_bpf failed";
    return std::nullopt;
  }
  std::vector<sock_filter> prog(static_cast<size_t>(size) / sizeof(sock_filter));
  const ssize_t n = pread(fd, prog.data(), static_cast<size_t>(size), 0);
  close(fd);
  if (n != size) {
    *error = "seccomp: short read of the exported program";
    return std::nullopt;
  }
  return prog;
}

}  // namespace

std::optional<std::vector<sock_filter>> BuildSeccompBpf(const BpfPolicy& policy,
                                                        std::string* error) {
  if (policy.default_action == BpfAction::kErrno && !ValidErrno(policy.default_errno)) {
    *error = "seccomp: bad default errno";
    return std::nullopt;
  }
  const uint32_t def = ToAction(policy.default_action, policy.default_errno);
  scmp_filter_ctx ctx = seccomp_init(def);
  if (ctx == nullptr) {
    *error = "seccomp_init failed";
    return std::nullopt;
  }
  struct CtxCloser {
    scmp_filter_ctx c;
    ~CtxCloser() { seccomp_release(c); }
  } closer{ctx};
  int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
  if (rc == 0) rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc != 0) {
    *error = std::string("seccomp_attr_set: ") + std::strerror(-rc);
    return std::nullopt;
  }
  for (const BpfRule& r : policy.rules) {
    if (r.action == BpfAction::kErrno && !ValidErrno(r.errno_value)) {
      *error = "seccomp: bad errno for " + r.name;
      return std::nullopt;
    }
    const int nr = seccomp_syscall_resolve_name(r.name.c_str());
    if (nr == __NR_SCMP_ERROR) {
      *error = "seccomp: unknown syscall '" + r.name + "'";
      return std::nullopt;
    }
    const uint32_t action = ToAction(r.action, r.errno_value);
    if (action == def) continue;  // libseccomp refuses rules that repeat the default
    rc = seccomp_rule_add(ctx, action, nr, 0);
    if (rc != 0) {
      *error = "seccomp_rule_add(" + r.name + "): " + std::strerror(-rc);
      return std::nullopt;
    }
  }
  return Export(ctx, error);
}

}  // namespace safex::drivers
