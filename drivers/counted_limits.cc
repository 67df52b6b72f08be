#include "drivers/counted_limits.h"

#include <fmt/format.h>

#include <csignal>

namespace safex::drivers {

void ApplyCountedLimits(const CountedLimits& c, const plan::Limits& lim, ProgramEnd* end) {
  const bool failed = end->exit_code != 0 || end->term_signal != 0;
  if (c.oom_kills > 0) {
    end->limit = LimitHit::kMemory;
    end->limit_detail =
        fmt::format("OOM-killed at the memory limit of {} bytes (cgroup oom_kill = {})",
                    lim.memory_bytes, c.oom_kills);
    end->exit_code = -1;
    end->term_signal = SIGKILL;
  } else if (c.pids_hits > 0 && c.pids_is_backstop) {
    end->limit = LimitHit::kPids;
    end->limit_detail =
        fmt::format("the host pids backstop ({}) was reached {} times", c.pids_max, c.pids_hits);
  } else if (c.pids_hits > 0 || c.fork_failures > 0) {
    // The process limit refused at least one fork: it constrained the run, whether or not the
    // program coped.
    end->limit = LimitHit::kPids;
    end->limit_detail = fmt::format("fork/clone failed with EAGAIN {} times at pids = {}{}",
                                    c.pids_hits + c.fork_failures, lim.pids,
                                    failed ? "" : " (the program then exited normally)");
  } else if (end->term_signal == SIGXFSZ) {
    end->limit = LimitHit::kDisk;
    end->limit_detail =
        fmt::format("file size limit (RLIMIT_FSIZE = {} bytes) exceeded", lim.disk_bytes);
  } else if (failed && !c.full_outputs.empty()) {
    end->limit = LimitHit::kDisk;
    end->limit_detail = fmt::format("output mount {} is full ({} bytes)",
                                    c.full_outputs.front().first, c.full_outputs.front().second);
  }
}

}  // namespace safex::drivers
