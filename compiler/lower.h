// Lowering one policy file's statements onto the draft (phase 1: structure, types, units;
// E020-E039). Also reads the `policy "name" extends "parent"` header.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/draft.h"
#include "compiler/values.h"
#include "dsl/ast.h"

namespace safex::compiler {

struct PolicyHeader {
  const dsl::Statement* stmt = nullptr;
  std::string name;
  std::optional<std::string> extends;
  dsl::Span extends_span;
};

// Exactly one top-level `policy "name" [extends "parent"] { ... }` (E028 otherwise).
std::optional<PolicyHeader> ReadPolicyHeader(const dsl::File& file, Diags& d);

// An `@override("reason")` written in a policy file.
struct OverrideMark {
  std::string reason;
  Origin origin;                    // of the annotated statement
  std::vector<std::string> fields;  // plan fields it turned out to loosen (filled by the caller)
};

// Statement locations written under an override -> index into the marks.
struct OverrideTable {
  std::vector<OverrideMark> marks;
  std::map<std::string, size_t> by_loc;
};

// Applies the body of `header` onto `draft`. Reports every structure/type/unit error.
void LowerPolicy(const PolicyHeader& header, Diags& d, Draft& draft, OverrideTable& overrides);

// "path:line:col" of a span.
Origin MakeOrigin(const std::string& path, const dsl::Span& span);

// A keyword statement's first word, or "" (with E020) when the head does not start with one.
std::string Keyword(const dsl::Statement& s, Diags& d);

// Shape checks shared with the host config. Report E027 and return false on mismatch.
bool ExpectAssignment(const dsl::Statement& s, Diags& d, const std::string& key);
bool ExpectBlock(const dsl::Statement& s, Diags& d, const std::string& key);

}  // namespace safex::compiler
