// The built-in probes of `safex test --builtin`: for every claim a plan makes, a test that tries
// to break it, derived from the plan itself (docs/policy-language.md, "Built-in probes").
//
//   claim                              attempt (safex-probe, probe/safex-probe.c)   must end
//   no metadata service                connect 169.254.169.254:80                   blocked, exit 0
//   egress only to the granted set     connect 1.1.1.1:9 (not granted)              blocked, exit 0
//   memory limit                       touch limit + 64 MiB                         memory-limit
//   pids limit                         limit + 8 live processes                     blocked, exit 0
//   read-only root                     create /safex-probe-write                    blocked, exit 0
//   only the plan's mounts             open a host path no mount provides           blocked, exit 0
//   each syscall rule that denies      call it (errno: that errno; kill: killed)    blocked /
//   nonzero-exit CPU-time limit                     spin cpu-limit (timeout
//                                                                                   if wall <= cpu)
//   output cap                         write cap + 1 MiB to stdout                  output-limit
//
// The probe program is static and runs from a read-only bind mount of its own directory at
// /.safex-probe, added to the policy's plan (which is verified again: the probe runs under a plan
// with one more read-only mount, and its audit rows carry that plan's digest).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "plan/ceilings.h"
#include "plan/plan.h"
#include "supervisor/runner.h"

namespace safex::supervisor {

inline constexpr char kProbeMountTarget[] = "/.safex-probe";
inline constexpr char kProbeProgram[] = "/.safex-probe/safex-probe";
inline constexpr char kInstalledProbeDir[] = "/usr/local/lib/safex/probe";

struct BuiltinProbes {
  PreparedPlan plan;  // the policy's plan with the probe directory bound at kProbeMountTarget
  std::vector<plan::PolicyTest> probes;
};

// The probes for `prepared`, and the plan they run under. `probe_dir` is the directory holding
// safex-probe ("" : next to this safex binary in probe-bin/, else kInstalledProbeDir); it must be
// root's and not writable by others (it is shown to the sandbox).
Result<BuiltinProbes> MakeBuiltinProbes(const PreparedPlan& prepared,
                                        const plan::Ceilings& ceilings,
                                        const std::string& probe_dir = "");

// The probes of `plan` (pure). `resolve` maps a syscall name to its x86_64 number (-1: unknown).
std::vector<plan::PolicyTest> ProbesFor(const plan::Plan& plan, int (*resolve)(const char*));

}  // namespace safex::supervisor
