// The policy compiler: policy files -> a verified execution plan.
//
// Phases (each reports all of its errors; a phase runs only when the ones before it passed):
//   1. parse (dsl/, E001-E019) every file of the `extends` chain
//   2. structure, types and units (E020-E039), resolving `extends` (E040-E044)
//   3. tightening: each policy against the one it extends (E045-E052; overrides warn E053/E054)
//   4. plan invariants (plan::Verify, E060-E089), reported at the statement that set the field
// The language is described in docs/policy-language.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dsl/diagnostics.h"
#include "plan/ceilings.h"
#include "plan/plan.h"

namespace safex::compiler {

struct CompileOptions {
  // Directories searched, in order, for NAME.policy when a policy says `extends "NAME"`.
  // Empty: the directory of the file being compiled.
  std::vector<std::string> search_path;
  plan::Ceilings ceilings = plan::DefaultCeilings();
  uint32_t max_extends_depth = 8;
};

struct CompileResult {
  std::optional<plan::Plan> plan;              // set only when there is no error
  std::vector<dsl::Diagnostic> diagnostics;    // errors and warnings, in phase and source order
  std::map<std::string, std::string> sources;  // path -> text, to render diagnostics
  bool ok() const;                             // a plan and no error-severity diagnostic
  size_t errors() const;
  size_t warnings() const;
};

// Compiles the policy at `path` (and the policies it extends). Never throws.
CompileResult CompileFile(const std::string& path, const CompileOptions& options);
// As CompileFile, with the policy's text given (its `extends` are still read from disk).
CompileResult CompileText(const std::string& path, const std::string& text,
                          const CompileOptions& options);

// Every diagnostic rendered with its source line and caret, in order.
std::string RenderAll(const CompileResult& result);

// Reads a policy-language file with the size cap the parser enforces (E090 on failure).
std::optional<std::string> ReadSourceFile(const std::string& path, std::string* error);

}  // namespace safex::compiler
