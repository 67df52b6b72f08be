// What the kernel says of a process in /proc/PID/stat, and of the machine's boot in /proc/stat
// (proc(5)). One parser for the callers that tell a live process from a recycled pid (recovery,
// the OCI runtime's state) and that count a process's CPU time (benchmarks).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace safex {

struct ProcStat {
  std::string comm;          // field 2, without its parentheses
  char state = '?';          // field 3: R, S, D, Z, X, ...
  pid_t ppid = 0;            // field 4
  uint64_t utime_ticks = 0;  // field 14, clock ticks (sysconf(_SC_CLK_TCK))
  uint64_t stime_ticks = 0;  // field 15
  uint64_t start_ticks = 0;  // field 22: the start time, clock ticks after boot
};

// Parses one /proc/PID/stat text. The command name (field 2) may hold spaces and parentheses, so
// the fields after it are counted from the last ')'. Nullopt when the text is not such a line
// (fewer than 22 fields).
std::optional<ProcStat> ParseProcStat(std::string_view text);

// /proc/PID/stat of `pid`, parsed; nullopt when there is no such process (or it cannot be read).
std::optional<ProcStat> ReadProcStat(pid_t pid);

// The machine's boot time in unix seconds (/proc/stat's btime: whole seconds); nullopt when it
// cannot be read.
std::optional<int64_t> BootTimeSeconds();

// Clock ticks (as in ProcStat) in nanoseconds.
int64_t TicksToNs(uint64_t ticks);

}  // namespace safex
