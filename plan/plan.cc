#include "plan/plan.h"

#include "plan/ceilings.h"

namespace safex::plan {

bool ImageAllowed(const ContainerRules& rules, const std::string& image) {
  for (const std::string& entry : rules.images) {
    if (!entry.empty() && entry.back() == '*') {
      if (image.compare(0, entry.size() - 1, entry, 0, entry.size() - 1) == 0 &&
          image.size() >= entry.size() - 1) {
        return true;
      }
    } else if (entry == image) {
      return true;
    }
  }
  return false;
}

const char* TrustName(Trust t) { return t == Trust::kTrusted ? "trusted" : "untrusted"; }

const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kGvisor:
      return "gvisor";
    case Backend::kMicrovm:
      return "microvm";
    case Backend::kNative:
      return "native";
  }
  return "unknown";
}

const char* MountKindName(MountKind k) {
  switch (k) {
    case MountKind::kBind:
      return "bind";
    case MountKind::kTmpfs:
      return "tmpfs";
    case MountKind::kInput:
      return "input";
    case MountKind::kOutput:
      return "output";
  }
  return "unknown";
}

const char* ProtocolName(Protocol p) { return p == Protocol::kUdp ? "udp" : "tcp"; }

const char* SyscallActionName(SyscallAction a) {
  switch (a) {
    case SyscallAction::kAllow:
      return "allow";
    case SyscallAction::kErrno:
      return "errno";
    case SyscallAction::kKill:
      return "kill";
    case SyscallAction::kLog:
      return "log";
  }
  return "unknown";
}

const char* ValidatorTargetName(ValidatorTarget t) {
  switch (t) {
    case ValidatorTarget::kStdout:
      return "stdout";
    case ValidatorTarget::kStderr:
      return "stderr";
    case ValidatorTarget::kFile:
      return "file";
  }
  return "unknown";
}

const char* KvmModeName(KvmMode m) {
  switch (m) {
    case KvmMode::kAuto:
      return "auto";
    case KvmMode::kRequire:
      return "require";
    case KvmMode::kNever:
      return "never";
  }
  return "unknown";
}

Ceilings DefaultCeilings() {
  constexpr uint64_t kSecond = 1'000'000'000ULL;
  constexpr uint64_t kMiB = 1ULL << 20;
  Ceilings c;
  c.max.wall_time_ns = 3600 * kSecond;
  c.max.cpu_time_ns = 3600 * kSecond;
  c.max.memory_bytes = 8192 * kMiB;
  c.max.pids = 4096;
  c.max.open_files = 65536;
  c.max.output_bytes = 1024 * kMiB;
  c.max.disk_bytes = 16384 * kMiB;
  c.max.cpus = 64;
  c.allowed_backends = {Backend::kGvisor, Backend::kMicrovm};
  return c;
}

}  // namespace safex::plan
