// A run's verdict (its outcome, as data) and the exit status `safex run` / `safex submit` derive
// from it. docs/cli.md is the user-facing table; keep the two in step.
#pragma once

#include <string>

#include "drivers/driver.h"

namespace safex::supervisor {

enum class Verdict {
  kOk,                 // the program exited 0 and every validator passed
  kNonzeroExit,        // the program exited with a non-zero status or died of a signal of its own
  kTimeout,            // killed at the wall-time limit
  kCpuLimit,           // killed at the CPU-time limit
  kMemoryLimit,        // killed by the memory limit (OOM in the sandbox's cgroup)
  kPidsLimit,          // the program failed because process creation hit the pids limit
  kOutputLimit,        // stopped because stdout+stderr exceeded the capture cap
  kValidatorRejected,  // a validator rejected what came out
  kRefused,            // nothing ran: policy, plan, backend, audit or request refused
  kSetupError,         // nothing ran: the sandbox could not be created
  kInterrupted,        // the supervisor stopped (SIGTERM/crash) before the run ended
};

const char* VerdictName(Verdict v);

// Exit statuses (design.md, "Command line"):
inline constexpr int kExitTimeout = 124;            // as timeout(1)
inline constexpr int kExitRefused = 125;            // refused or setup error: nothing ran
inline constexpr int kExitNotExecutable = 126;
inline constexpr int kExitNotFound = 127;
inline constexpr int kExitValidatorRejected = 122;  // ran, but what came out was rejected
inline constexpr int kExitOutputLimit = 123;        // ran, stopped at the output cap
inline constexpr int kExitInterrupted = 130;        // supervisor interrupted (128 + SIGINT)

// The verdict of a run that ended (driver result, before output validation).
Verdict VerdictOf(const drivers::RunResult& r);

// The exit status for a verdict and the program's own result.
int ExitStatusOf(Verdict v, const drivers::RunResult& r);

}  // namespace safex::supervisor
