// The order `safex run` (and the daemon) follows around every run, in one place:
//
//   1. RecordStart, committed   -- if this fails nothing runs: the request is refused (exit 125)
//   2. the run
//   3. RecordEnd, committed     -- if this fails the result is not reported as a success
//      (RecordInterrupted instead when the run's verdict is interrupted: it was cancelled)
//   4. report the result (only now)
//
// Usage in the supervisor:
//   auto end = audit::RunAudited(*log, start, [&] { return DoTheRun(plan); });
//   if (!end.ok()) { print end.status(); return 125; }
//   Report(*end);
#pragma once

#include <type_traits>
#include <utility>

#include "audit/audit_log.h"

namespace safex::audit {

// Whether the run itself happened when RunAudited returns an error.
enum class AuditFailure {
  kBeforeRun,  // RecordStart failed: nothing ran
  kAfterRun,   // the run happened but its end could not be recorded: the result is withheld
};

// `run` is called as `RunEnd run()` only after the start event has committed. The returned RunEnd
// gets start.run_id. An error Status means the caller must not report a result; `failure`
// (optional) says whether the run happened.
template <typename RunFn>
requires std::is_invocable_r_v<RunEnd, RunFn&> Result<RunEnd> RunAudited(
    AuditLog& log, const RunStart& start, RunFn&& run, AuditFailure* failure = nullptr) {
  Status st = log.RecordStart(start);
  if (!st.ok()) {
    if (failure != nullptr) *failure = AuditFailure::kBeforeRun;
    return st.With("refusing to run without an audit record");
  }
  RunEnd end = std::forward<RunFn>(run)();
  end.run_id = start.run_id;
  if (end.verdict == Verdict::kInterrupted) {
    // The run was stopped from outside (the supervisor was told to stop): closed with an
    // interrupted event, as crash recovery closes a run whose supervisor died. `error` says why.
    Interrupted in;
    in.run_id = end.run_id;
    in.reason = end.error.empty() ? "interrupted" : end.error;
    in.time_ns = end.end_time_ns;
    st = log.RecordInterrupted(in);
  } else {
    st = log.RecordEnd(end);
  }
  if (!st.ok()) {
    if (failure != nullptr) *failure = AuditFailure::kAfterRun;
    return st.With("the run finished but its result could not be recorded; withholding it");
  }
  return end;
}

}  // namespace safex::audit
