// What a native run's outcome was, decided by one pure function from what the supervision
// observed from outside the sandbox: the first process's exit (pid 1 of the run's pid namespace,
// which is the program), the limit the supervisor stopped it for, and the cgroup's counters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/subprocess.h"
#include "drivers/counted_limits.h"
#include "drivers/driver.h"
#include "plan/plan.h"

namespace safex::drivers::native {

struct Observation {
  // The supervisor stopped the run for this limit, with why.
  std::optional<LimitHit> stopped_for;
  std::string stop_detail;
  bool cancelled = false;          // stopped through RunRequest::cancel
  std::optional<ExitStatus> exit;  // the program's own end (nullopt: never reaped)
  uint64_t cpu_ns = 0;
  CountedLimits counted;
};

ProgramEnd Classify(const Observation& o, const plan::Limits& limits, bool* interrupted);

}  // namespace safex::drivers::native
