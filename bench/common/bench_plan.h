// The plan the backend benchmarks run (microvm_bench, microvm_pool_bench, native_bench): generous
// limits, a /tmp tmpfs, and the binds, identity and trust each case adds.
#pragma once

#include <string>

#include "plan/plan.h"

namespace safex::bench {

inline plan::Mount Bind(const std::string& p) {
  plan::Mount m;
  m.kind = plan::MountKind::kBind;
  m.source = p;
  m.target = p;
  return m;
}

inline plan::Plan BenchPlan(plan::Backend backend) {
  plan::Plan p;
  p.backend = backend;
  p.limits.wall_time_ns = 30'000'000'000ull;
  p.limits.cpu_time_ns = 10'000'000'000ull;
  p.limits.memory_bytes = 256ull << 20;
  p.limits.pids = 64;
  p.limits.open_files = 256;
  p.limits.output_bytes = 1 << 20;
  p.limits.disk_bytes = 64ull << 20;
  p.limits.cpus = 1;
  p.env = {{"PATH", "/usr/bin:/bin"}};
  plan::Mount tmp;
  tmp.kind = plan::MountKind::kTmpfs;
  tmp.target = "/tmp";
  tmp.read_only = false;
  tmp.size_bytes = 64ull << 20;
  tmp.noexec = true;
  p.mounts.push_back(tmp);
  return p;
}

}  // namespace safex::bench
