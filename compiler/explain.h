// Plain-English renderings of a plan (`safex explain`) and of a comparison (`safex diff`).
#pragma once

#include <string>
#include <vector>

#include "compiler/compare.h"
#include "plan/plan.h"

namespace safex::compiler {

// What the sandboxed code may and may not do under `plan`: backend, limits in human units,
// filesystem, network, environment, syscalls, validators, overrides.
std::string Explain(const plan::Plan& plan);

// One line per change: "LOOSENS  memory raised from 512MiB to 1GiB", loosening first.
std::string DescribeChanges(const std::vector<Change>& changes);

}  // namespace safex::compiler
