// `safex fmt`: the canonical layout of a policy file. Idempotent: Format(Format(x)) == Format(x).
// Comments are kept.
#pragma once

#include <string>

#include "dsl/ast.h"

namespace safex::dsl {

// REQUIRES: file parsed without errors.
std::string Format(const File& file);

}  // namespace safex::dsl
