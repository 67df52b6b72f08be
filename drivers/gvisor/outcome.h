// What a gVisor run's outcome was, decided by one pure function from what the supervision
// observed from outside the sandbox (the cgroup's counters, runsc's exit, its debug log, its last
// words). Unit-tested over messages recorded from runsc 20240729 (gvisor_unit_test.cc). Parsing
// runsc's text is the recorded fallback: it is consulted only when runsc failed before the
// program's exit was logged (the program was not found or not executable, or the sandbox did not
// start).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"
#include "drivers/driver.h"
#include "drivers/gvisor/sandbox_log.h"
#include "plan/plan.h"

namespace safex::drivers::gvisor {

struct Observation {
  // The supervisor stopped the run: for this limit (kNone: it could not supervise), with why.
  std::optional<LimitHit> stopped_for;
  std::string stop_detail;
  bool cancelled = false;  // stopped through RunRequest::cancel
  ExitStatus runsc;        // `runsc run`'s own exit status
  bool runsc_reaped = false;
  std::optional<SandboxLogScanner::AppExit> app_exit;  // the program's exit, from the debug log
  bool app_started = false;                            // the debug log saw the program start
  std::string runsc_error;  // the last line of runsc's own diagnostics ("" if none)
  uint64_t oom_kills = 0;   // the run cgroup's counters, read after every process was gone
  uint64_t pids_hits = 0;
  uint64_t fork_failures = 0;  // fork/clone that failed with EAGAIN (from the debug log)
  uint64_t pids_backstop = 0;  // the host pids cgroup limit
  // Output mounts that were full when the run ended (target, size), in plan order.
  std::vector<std::pair<std::string, uint64_t>> full_outputs;
};

struct Outcome {
  int exit_code = -1;
  int term_signal = 0;
  LimitHit limit = LimitHit::kNone;
  std::string limit_detail;
  std::string backend_error;  // runsc's own words about the program (126/127), for the record
  bool interrupted = false;
};

// The outcome, or a setup error when the sandbox never started the program. A setup error's
// message is in safex's words on its first line; runsc's own error chain follows a newline (for
// the audit record and the operator's log only).
Result<Outcome> Classify(const Observation& o, const plan::Limits& limits);

// 127 or 126 when runsc's last words say the program could not be loaded (recorded shapes:
// `failed to load /usr/bin/x: no such file or directory`, `error finding executable "x" in PATH
// [...]: no such file or directory`, `failed to load /usr: permission denied`); nullopt otherwise.
std::optional<int> NotRunnableStatus(const ExitStatus& runsc, const std::string& runsc_error);

}  // namespace safex::drivers::gvisor
