#include "drivers/gvisor/outcome.h"

#include <fmt/format.h>

#include <csignal>

#include "drivers/counted_limits.h"

namespace safex::drivers::gvisor {
namespace {

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// The program's own exit as runsc logged it, when runsc's exit status agrees with it (runsc exits
// with the program's status, 128 + N for a signal).
bool AppExitAgrees(const Observation& o) {
  if (!o.app_exit || !o.runsc.exited) return false;
  const SandboxLogScanner::AppExit& a = *o.app_exit;
  return (a.signaled && o.runsc.code == 128 + a.value) ||
         (!a.signaled && o.runsc.code == (a.value & 0xff));
}

// The limits read from the cgroup and the debug log after the run (drivers/counted_limits.h).
void ApplyCounters(const Observation& o, const plan::Limits& lim, Outcome* out) {
  CountedLimits c;
  c.oom_kills = o.oom_kills;
  c.pids_hits = o.pids_hits;
  c.pids_max = o.pids_backstop;
  c.pids_is_backstop = true;
  c.fork_failures = o.fork_failures;
  c.full_outputs = o.full_outputs;
  ProgramEnd end{out->exit_code, out->term_signal, out->limit, out->limit_detail};
  ApplyCountedLimits(c, lim, &end);
  out->exit_code = end.exit_code;
  out->term_signal = end.term_signal;
  out->limit = end.limit;
  out->limit_detail = end.limit_detail;
}

}  // namespace

std::optional<int> NotRunnableStatus(const ExitStatus& runsc, const std::string& err) {
  if (!runsc.exited || runsc.code != 128) return std::nullopt;
  const bool load_failed = Contains(err, "failed to load");
  const bool not_in_path = Contains(err, "error finding executable");
  if ((load_failed || not_in_path) && Contains(err, "no such file or directory")) return 127;
  if (load_failed && (Contains(err, "permission denied") || Contains(err, "exec format error") ||
                      Contains(err, "is a directory"))) {
    return 126;
  }
  return std::nullopt;
}

Result<Outcome> Classify(const Observation& o, const plan::Limits& lim) {
  Outcome out;
  if (o.cancelled) {
    // The caller stopped it: whatever the program did so far is reported, nothing more judged.
    out.interrupted = true;
    out.term_signal = SIGKILL;
    return out;
  }
  if (o.stopped_for && *o.stopped_for != LimitHit::kNone) {
    out.limit = *o.stopped_for;
    out.limit_detail = o.stop_detail;
    out.term_signal = SIGKILL;
    return out;
  }
  if (AppExitAgrees(o)) {
    if (o.app_exit->signaled) {
      out.term_signal = o.app_exit->value;
    } else {
      out.exit_code = o.app_exit->value & 0xff;
    }
  } else if (std::optional<int> status = NotRunnableStatus(o.runsc, o.runsc_error)) {
    out.exit_code = *status;  // the program was not found (127) or not executable (126)
    out.backend_error = o.runsc_error;
  } else if (!o.app_started) {
    return Status::Internal(
        fmt::format("gvisor: the sandbox could not start the program (runsc exit {})",
                    o.runsc.ShellCode()) +
        (o.runsc_error.empty() ? "" : "\nrunsc: " + o.runsc_error));
  } else {
    out.backend_error =
        fmt::format("sandbox ended abnormally (runsc exit {}){}", o.runsc.ShellCode(),
                    o.runsc_error.empty() ? "" : ": " + o.runsc_error);
    if (!o.runsc.exited) out.term_signal = o.runsc.signal;
  }
  ApplyCounters(o, lim, &out);
  return out;
}

}  // namespace safex::drivers::gvisor
