// Diagnostics: `path:line:col: error[E0xx]: message`, the source line, a caret under the span,
// and a `help:` line where one helps. Every phase reports all of its errors, not just the first.
//
// Error codes are stable (docs/policy-language.md lists them all). Ranges:
//   E001-E019  syntax (dsl/)            E020-E039  structure, types, units (compiler/)
//   E040-E059  extends and tightening   E060-E089  plan invariants (plan/verify)
//   E090-E099  host config and I/O
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dsl/ast.h"

namespace safex::dsl {

enum class Severity { kError, kWarning, kNote };

struct Diagnostic {
  Severity severity = Severity::kError;
  std::string code;     // "E012"
  std::string message;  // lower case, no trailing period
  std::string path;     // source file ("" for diagnostics without a file)
  Span span;
  std::string help;     // optional: "did you mean `memory`?"
};

// Renders one diagnostic with its source line and caret. `source` is the whole text of
// d.path (may be empty when unavailable: then only the first line is printed).
// Control characters and invalid UTF-8 from the source are escaped so hostile policy text cannot
// inject terminal escapes into a reviewer's terminal.
std::string RenderDiagnostic(const Diagnostic& d, std::string_view source);

// Edit distance suggestions: the closest candidate within a small distance, or "".
std::string ClosestMatch(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace safex::dsl
