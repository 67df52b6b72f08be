#include "drivers/gvisor/outcome.h"

#include <fmt/format.h>

#include <csignal>

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

// The limits read from the cgroup and the debug log after the run, in the order they matter: a
// memory kill, then the host pids backstop, then a fork refused at the process limit, then the
// file size limit, then a full output mount behind a failure.
void ApplyCountedLimits(const Observation& o, const plan::Limits& lim, Outcome* out) {
  if (o.oom_kills > 0) {
    out->limit = LimitHit::kMemory;
    out->limit_detail =
        fmt::format("OOM-killed at the memory limit of {} bytes (cgroup oom_kill = {})",
                    lim.memory_bytes, o.oom_kills);
    out->exit_code = -1;
    out->term_signal = SIGKILL;
  } else if (o.pids_hits > 0) {
    out->limit = LimitHit::kPids;
    out->limit_detail = fmt::format("the host pids backstop ({}) was reached {} times",
                                    o.pids_backstop, o.pids_hits);
  } else if (o.fork_failures > 0) {
    // The process limit refused at least one fork: it constrained the run, whether or not the
    // program coped (EAGAIN from fork inside gVisor means RLIMIT_NPROC; see notes).
    out->limit = LimitHit::kPids;
    const bool failed = out->exit_code != 0 || out->term_signal != 0;
    out->limit_detail =
        fmt::format("fork/clone failed with EAGAIN {} times at pids = {}{}", o.fork_failures,
                    lim.pids, failed ? "" : " (the program then exited normally)");
  } else if (out->term_signal == SIGXFSZ) {
    out->limit = LimitHit::kDisk;
    out->limit_detail =
        fmt::format("file size limit (RLIMIT_FSIZE = {} bytes) exceeded", lim.disk_bytes);
  } else if ((out->exit_code != 0 || out->term_signal != 0) && !o.full_outputs.empty()) {
    out->limit = LimitHit::kDisk;
    out->limit_detail = fmt::format("output mount {} is full ({} bytes)",
                                    o.full_outputs.front().first, o.full_outputs.front().second);
  }
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
  ApplyCountedLimits(o, lim, &out);
  return out;
}

}  // namespace safex::drivers::gvisor
