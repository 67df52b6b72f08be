#include "supervisor/verdict.h"

#include <csignal>

namespace safex::supervisor {

Verdict VerdictOf(const drivers::RunResult& r) {
  using drivers::LimitHit;
  switch (r.limit) {
    case LimitHit::kWallTime:
      return Verdict::kTimeout;
    case LimitHit::kCpuTime:
      return Verdict::kCpuLimit;
    case LimitHit::kMemory:
      return Verdict::kMemoryLimit;
    case LimitHit::kOutput:
      return Verdict::kOutputLimit;
    // pids, open files and disk limits make a syscall fail inside the sandbox; the program decides
    // what to do about it. It is only the run's verdict when the program then failed.
    case LimitHit::kPids:
      if (r.exit_code != 0 || r.term_signal != 0) return Verdict::kPidsLimit;
      break;
    case LimitHit::kDisk:
    case LimitHit::kOpenFiles:
    case LimitHit::kNone:
      break;
  }
  if (r.exit_code == 0 && r.term_signal == 0) return Verdict::kOk;
  return Verdict::kNonzeroExit;
}

int ExitStatusOf(Verdict v, const drivers::RunResult& r) {
  switch (v) {
    case Verdict::kTimeout:
      return kExitTimeout;
    case Verdict::kCpuLimit:
      return 128 + SIGXCPU;  // what a kernel RLIMIT_CPU kill reports
    case Verdict::kMemoryLimit:
      return 128 + SIGKILL;
    case Verdict::kOutputLimit:
      return kExitOutputLimit;
    case Verdict::kValidatorRejected:
      return kExitValidatorRejected;
    case Verdict::kDeliveryFailed:
      return kExitDeliveryFailed;
    case Verdict::kRefused:
    case Verdict::kSetupError:
      return kExitRefused;
    case Verdict::kInterrupted:
      return kExitInterrupted;
    case Verdict::kOk:
    case Verdict::kNonzeroExit:
    case Verdict::kPidsLimit:
      break;
  }
  if (r.term_signal != 0) return 128 + r.term_signal;
  if (r.exit_code >= 0) return r.exit_code;
  return kExitRefused;
}

}  // namespace safex::supervisor
