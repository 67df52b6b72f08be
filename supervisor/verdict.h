// A run's verdict (its outcome, as data) and the exit status `safex run` / `safex submit` derive
// from it. docs/cli.md is the user-facing table; keep the two in step.
#pragma once

#include <string>

#include "audit/verdict.h"
#include "drivers/driver.h"

namespace safex::supervisor {

// The verdict list itself is audit::Verdict (audit/verdict.h): one list for the whole project.
using audit::Verdict;
using audit::VerdictName;

// Exit statuses (design.md, "Command line"):
inline constexpr int kExitTimeout = 124;  // as timeout(1)
inline constexpr int kExitRefused = 125;  // refused or setup error: nothing ran
inline constexpr int kExitNotExecutable = 126;
inline constexpr int kExitNotFound = 127;
inline constexpr int kExitValidatorRejected = 122;  // ran, but what came out was rejected
inline constexpr int kExitOutputLimit = 123;        // ran, stopped at the output cap
inline constexpr int kExitDeliveryFailed = 121;     // ran, its output files were not delivered
inline constexpr int kExitUnknownOutcome = 120;     // submit: admitted, but the answer was lost
inline constexpr int kExitInterrupted = 130;        // supervisor interrupted (128 + SIGINT)

// The verdict of a run that ended (driver result, before output validation).
Verdict VerdictOf(const drivers::RunResult& r);

// The exit status for a verdict and the program's own result.
int ExitStatusOf(Verdict v, const drivers::RunResult& r);

}  // namespace safex::supervisor
