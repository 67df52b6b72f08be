// Lowering `test "name" { ... }` statements (docs/policy-language.md, "Tests"):
//
//   test "metadata is unreachable" {
//     run ["python3", "-c", "..."]
//     stdin = "text"                       # optional
//     input "data.csv" = "a,b\n"           # optional, repeatable: files in the input mount
//     expect {                             # at least one expectation
//       exit = 0                           # 0-255
//       verdict = memory-limit             # ok, nonzero-exit, timeout, cpu-limit, ...
//       stdout = /^blocked$/               # RE2, matched anywhere in the delivered stream
//       stderr = /denied/
//       file "/data/out/result.json"       # delivered (repeatable)
//       no_file "/data/out/secret"         # not delivered (repeatable)
//       denied = true                      # a denial test whose outcome is a success
//     }
//   }
//
// Inherited tests are kept; a redefinition by a policy that extends the test's author is
// checked here (E055 when it weakens a denial test), as the draft is built layer by layer.
#pragma once

#include <string>

#include "compiler/draft.h"
#include "compiler/lower.h"
#include "compiler/values.h"
#include "dsl/ast.h"

namespace safex::compiler {

// Adds (or, for an inherited one, replaces) the test `s` of policy `policy_name` in `draft`.
void LowerTest(const dsl::Statement& s, const std::string& policy_name, Diags& d, Draft& draft,
               const Origin& here);

}  // namespace safex::compiler
