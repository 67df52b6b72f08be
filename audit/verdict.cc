#include "audit/verdict.h"

#include <array>

namespace safex::audit {
namespace {

constexpr std::array<VerdictInfo, 12> kVerdicts = {{
    {Verdict::kOk, "ok", "exited 0 and every validator accepted the output"},
    {Verdict::kNonzeroExit, "nonzero-exit", "exited with a non-zero status or died of a signal"},
    {Verdict::kTimeout, "timeout", "the wall-clock limit fired"},
    {Verdict::kCpuLimit, "cpu-limit", "the CPU-time limit fired"},
    {Verdict::kMemoryLimit, "memory-limit", "the memory limit fired"},
    {Verdict::kPidsLimit, "pids-limit", "the process-count limit fired"},
    {Verdict::kOutputLimit, "output-limit", "stdout + stderr exceeded the output cap"},
    {Verdict::kValidatorRejected, "validator-rejected", "an output validator rejected the output"},
    {Verdict::kDeliveryFailed, "delivery-failed",
     "the output files passed validation but could not be written to the caller's directory"},
    {Verdict::kRefused, "refused", "the request was refused; nothing ran"},
    {Verdict::kSetupError, "setup-error", "the sandbox could not be set up; nothing ran"},
    {Verdict::kInterrupted, "interrupted", "the run started but never ended (supervisor died)"},
}};

}  // namespace

std::span<const VerdictInfo> AllVerdicts() { return kVerdicts; }

std::string_view VerdictName(Verdict v) {
  for (const auto& info : kVerdicts) {
    if (info.verdict == v) return info.name;
  }
  return "unknown";
}

std::optional<Verdict> ParseVerdict(std::string_view name) {
  for (const auto& info : kVerdicts) {
    if (info.name == name) return info.verdict;
  }
  return std::nullopt;
}

}  // namespace safex::audit
