// What changes between two plans, and whether each change loosens or tightens what the sandboxed
// code may do. One comparison serves `extends` (a child may only tighten its parent) and
// `safex diff` (review: what does this change loosen?).
#pragma once

#include <string>
#include <vector>

#include "plan/plan.h"

namespace safex::compiler {

struct Change {
  enum class Effect { kLoosens, kTightens, kNeutral };
  Effect effect = Effect::kNeutral;
  // The code a loosening is reported under when a child policy does it without an override:
  // E045 limit, E046 trust, E047 backend, E048 mount, E049 egress, E050 syscalls, E051 root user,
  // E052 validator, E055 test. Empty for tightening and neutral changes.
  std::string code;
  // Plan field path in `now` (or in `old` for something removed), e.g. "limits.memory_bytes",
  // "mounts[2]", "network.egress[0]".
  std::string field;
  std::string description;  // "memory raised from 512MiB to 1GiB"
};

// Changes from `old` to `now`, in plan field order. Ignores names, sources, digests, provenance
// and override records.
std::vector<Change> ComparePlans(const plan::Plan& old, const plan::Plan& now);

const char* EffectName(Change::Effect e);  // "loosens", "tightens", "changes"

// Strength of isolation (native < gvisor < microvm) and of syscall actions
// (allow < log < errno < kill), as the tightening rules order them.
int BackendStrength(plan::Backend b);
int ActionStrictness(plan::SyscallAction a);

}  // namespace safex::compiler
