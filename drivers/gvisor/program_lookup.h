// Whether the program of a run certainly does not exist in the sandbox's root view, so that the
// run ends with 127 before any sandbox is made (the gVisor start it saves is most of a run's
// cost, and runsc's own "not found" messages come in several shapes).
//
// The root view is the plan's mounts over an empty root. A candidate path (argv[0] if it has a
// '/', relative to the plan's cwd when it is not absolute; otherwise each PATH directory of the
// plan's environment joined with it) is certainly absent only when:
//   - it lies in a bind mount (or the input mount) and, on the host, some component of it below
//     the mount's source does not exist, with no symlink met on the way (a symlink may point to
//     another mount inside, which the host cannot judge); or
//   - it lies below a tmpfs or output mount (they are empty when the program starts).
// Anything else (a path that exists, a symlink, no PATH, a path under no mount) is left to the
// sandbox to decide (and the outcome classifier reads runsc's message).
#pragma once

#include <optional>
#include <string>

#include "plan/plan.h"

namespace safex::drivers::gvisor {

// Why `argv0` is certainly not in the sandbox (for the record), or nullopt when it may be.
// `input_dir` is the host directory behind the plan's input mount ("" : empty).
std::optional<std::string> CertainlyMissingProgram(const plan::Plan& plan, const std::string& argv0,
                                                   const std::string& input_dir);

}  // namespace safex::drivers::gvisor
