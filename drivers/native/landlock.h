// Landlock for the native sandbox: file-system rights derived from the plan's mounts, on kernels
// that have Landlock (docs/native.md). The mounts already decide what exists and what is
// read-only; Landlock is the second line, enforced by the kernel on every path the program opens
// whatever a mount's flags turn out to be: it may read everything of its own root, execute only
// from mounts that are not noexec, write, create and remove only below its writable mounts, and
// never make device nodes. Rights the running kernel's ABI does not know are left out (an older
// kernel enforces less, never more); the run's record names the ABI used, or says "none".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace safex::drivers::native {

// The kernel's Landlock ABI version (1 upward), or 0 when it has no Landlock (not built, or off
// at boot).
int LandlockAbi();

struct LandlockRule {
  std::string path;  // inside the sandbox, after pivot_root
  uint64_t access = 0;
};

struct LandlockRuleset {
  int abi = 0;           // 0: no Landlock (nothing is applied)
  uint64_t handled = 0;  // every right this ABI knows: what is not granted below is denied
  std::vector<LandlockRule> rules;
};

// The ruleset for `plan` under ABI `abi` (0 gives an empty ruleset).
LandlockRuleset LandlockRulesFor(const plan::Plan& plan, int abi);

// "read /; execute /usr; write /tmp ..." for the run's record and tests.
std::string DescribeRuleset(const LandlockRuleset& r);

// Child side (sandbox_child.h): creates the ruleset, adds each rule (opening its path O_PATH),
// and restricts the calling thread. REQUIRES no_new_privs. No allocation. 0, or the errno of
// the failing call with *failed_rule set to the rule's index (-1: the ruleset itself).
int ApplyLandlock(int abi, uint64_t handled, const LandlockRule* rules, size_t n, int* failed_rule);

}  // namespace safex::drivers::native
