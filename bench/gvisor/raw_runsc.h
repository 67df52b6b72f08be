// A bare `runsc run` of a bundle equivalent to what GvisorDriver builds for a plan: the anchor
// the benchmarks compare safex against (bench/gvisor, bench/run).
#pragma once

#include <string>
#include <vector>

#include "bench/common/bench_util.h"  // Median, kept visible to users of this header
#include "common/status.h"
#include "plan/plan.h"

namespace safex::bench {

inline constexpr const char* kRunsc = "/usr/local/bin/runsc";

// Made once per (plan, argv); runsc creates and removes its own cgroup from the spec's resources
// on each run (its usual mode). runsc does not always manage the removal (seen after failed
// runs), so the destructor removes the cgroup in every hierarchy too.
struct RawBundle {
  std::string dir;
  std::string bundle;
  std::string cgroups_path;
  std::string platform;  // the plan's gVisor platform, passed to runsc as the driver does
  Status Make(const plan::Plan& p, const std::vector<std::string>& argv, const std::string& name);
  ~RawBundle();
};

// `p` for a bare bundle: its input and output mounts (a snapshot and a host tmpfs the driver
// makes) become plain binds of the existing directory `dir`; everything else stays the same.
plan::Plan WithPlainDirs(plan::Plan p, const std::string& dir);

// One `runsc run` of the bundle (container id unique by `i`); returns its wall time in ms.
// driver_flags adds the flags the driver passes (--strace of fork-like calls, --debug-log pipe).
Result<double> RawRun(const RawBundle& b, int i, bool driver_flags);

}  // namespace safex::bench
