// What a run's counters say once every process of it is gone: the memory cgroup's OOM kills, the
// pids cgroup's refusals, forks refused at the process limit, the file size limit's signal, a
// full output mount. One reading for every backend that counts them on the host (gVisor,
// native), in the order they matter.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "drivers/driver.h"
#include "plan/plan.h"

namespace safex::drivers {

struct CountedLimits {
  uint64_t oom_kills = 0;  // memory cgroup: OOM kills at the run's limit
  uint64_t pids_hits = 0;  // pids cgroup: forks refused at pids.max
  uint64_t pids_max = 0;   // that pids.max
  // true: pids.max is only a backstop above the plan's limit (gVisor, whose own threads count);
  // false: pids.max is the plan's limit itself (native).
  bool pids_is_backstop = false;
  uint64_t fork_failures = 0;  // forks refused at the plan's limit, seen by the backend itself
  // Output mounts that were full when the run ended (target, size), in plan order.
  std::vector<std::pair<std::string, uint64_t>> full_outputs;
};

// The program's end as the backend saw it (exit status or signal), and the limit that explains it.
struct ProgramEnd {
  int exit_code = -1;
  int term_signal = 0;
  LimitHit limit = LimitHit::kNone;
  std::string limit_detail;
};

// Applies the counters to `end`: a memory kill (the program then ended by SIGKILL whatever it
// reported), the pids limit, the file size limit (SIGXFSZ), a full output mount behind a failure.
void ApplyCountedLimits(const CountedLimits& c, const plan::Limits& limits, ProgramEnd* end);

}  // namespace safex::drivers
