// The verdict of a run: what happened, as one word. This is the ONE list of verdicts in safex
// (design.md lists them; cpu-limit was added here). The audit log stores the name as text; the
// supervisor picks the verdict, the audit library only records it. docs/audit.md documents each.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace safex::audit {

enum class Verdict {
  kOk,                 // exited 0, every validator accepted the output
  kNonzeroExit,        // exited with a status other than 0 (or was killed by a signal of its own)
  kTimeout,            // the wall-clock limit fired (exit 124)
  kCpuLimit,           // the CPU-time limit fired
  kMemoryLimit,        // the memory limit fired (exit 137)
  kPidsLimit,          // the process-count limit fired
  kOutputLimit,        // stdout + stderr exceeded the output cap
  kValidatorRejected,  // the program finished but an output validator rejected its output
  kDeliveryFailed,     // accepted output files could not be written to the caller's directory
  kRefused,            // the request was refused before anything ran (exit 125)
  kSetupError,         // the sandbox could not be set up; nothing of the program ran (exit 125)
  kInterrupted,        // the run started but the supervisor died before it ended (crash recovery)
};

struct VerdictInfo {
  Verdict verdict;
  std::string_view name;     // as stored in the log and accepted by `safex audit list --verdict`
  std::string_view meaning;  // one line for docs and --help
};

// Every verdict, in declaration order.
std::span<const VerdictInfo> AllVerdicts();
std::string_view VerdictName(Verdict v);
std::optional<Verdict> ParseVerdict(std::string_view name);

}  // namespace safex::audit
