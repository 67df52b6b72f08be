// `safex fmt`: the canonical layout of a policy file. Idempotent: Format(Format(x)) == Format(x).
// Comments are kept.
#pragma once

#include <string>

#include "dsl/ast.h"

namespace safex::dsl {

// REQUIRES: file parsed without errors.
std::string Format(const File& file);

// One value in canonical source form, on one line: `ptrace`, `"a\"b"`, `64MiB`, `/a\/b/`,
// `[a, "b"]`. For messages that quote a value back to the user (escape it for the terminal
// through RenderDiagnostic, which does so for every message).
std::string FormatValue(const Value& value);

}  // namespace safex::dsl
