#include "drivers/native/outcome.h"

#include <fmt/format.h>

#include <csignal>

namespace safex::drivers::native {

ProgramEnd Classify(const Observation& o, const plan::Limits& lim, bool* interrupted) {
  ProgramEnd end;
  *interrupted = false;
  if (o.cancelled) {
    // The caller stopped it: whatever the program did so far is reported, nothing more judged.
    *interrupted = true;
    end.term_signal = SIGKILL;
    return end;
  }
  if (o.stopped_for && *o.stopped_for != LimitHit::kNone) {
    end.limit = *o.stopped_for;
    end.limit_detail = o.stop_detail;
    end.term_signal = SIGKILL;
    return end;
  }
  if (o.exit) {
    if (o.exit->exited) {
      end.exit_code = o.exit->code;
    } else {
      end.term_signal = o.exit->signal;
    }
  }
  // The per-process RLIMIT_CPU backstop: SIGXCPU at the soft limit, SIGKILL at the hard one (both
  // above the plan's total, which the supervisor's accounting normally stops first).
  if (end.term_signal == SIGXCPU ||
      (end.term_signal == SIGKILL && o.cpu_ns >= lim.cpu_time_ns && o.counted.oom_kills == 0)) {
    end.limit = LimitHit::kCpuTime;
    end.limit_detail = fmt::format("cpu time limit: {} ms (RLIMIT_CPU)", lim.cpu_time_ns / 1000000);
    return end;
  }
  ApplyCountedLimits(o.counted, lim, &end);
  return end;
}

}  // namespace safex::drivers::native
