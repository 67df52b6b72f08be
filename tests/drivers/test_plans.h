// Realistic plans for driver tests, built directly in C++ (no compiler involved): host /usr, /lib,
// /lib64, /bin read-only, /tmp a size-capped tmpfs, a non-root user, every limit set.
#pragma once

#include <string>

#include "plan/plan.h"

namespace safex::drivers::testing {

inline plan::Mount BindRo(const std::string& path) {
  plan::Mount m;
  m.kind = plan::MountKind::kBind;
  m.source = path;
  m.target = path;
  m.read_only = true;
  m.nosuid = true;
  m.nodev = true;
  return m;
}

inline plan::Mount Tmpfs(const std::string& target, uint64_t size) {
  plan::Mount m;
  m.kind = plan::MountKind::kTmpfs;
  m.target = target;
  m.read_only = false;
  m.size_bytes = size;
  m.noexec = true;
  return m;
}

inline plan::Mount Output(const std::string& target, uint64_t size) {
  plan::Mount m = Tmpfs(target, size);
  m.kind = plan::MountKind::kOutput;
  return m;
}

inline plan::Mount Input(const std::string& target) {
  plan::Mount m;
  m.kind = plan::MountKind::kInput;
  m.target = target;
  m.read_only = true;
  m.noexec = true;
  return m;
}

inline plan::Plan BasePlan() {
  plan::Plan p;
  p.policy_name = "driver-test";
  p.trust = plan::Trust::kUntrusted;
  p.backend = plan::Backend::kGvisor;
  p.limits.wall_time_ns = 20'000'000'000ull;
  p.limits.cpu_time_ns = 10'000'000'000ull;
  p.limits.memory_bytes = 256ull << 20;
  p.limits.pids = 64;
  p.limits.open_files = 256;
  p.limits.output_bytes = 1 << 20;
  p.limits.disk_bytes = 64ull << 20;
  p.limits.cpus = 1;
  p.process.uid = 65534;
  p.process.gid = 65534;
  p.process.cwd = "/";
  p.mounts = {BindRo("/usr"), BindRo("/lib"), BindRo("/lib64"), BindRo("/bin"),
              Tmpfs("/tmp", 16ull << 20)};
  p.env = {{"PATH", "/usr/bin:/bin"}, {"LANG", "C.UTF-8"}};
  return p;
}

}  // namespace safex::drivers::testing
