// libFuzzer target for the policy parser and formatter (see CMakeLists.txt for the properties).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/diagnostics.h"
#include "dsl/formatter.h"
#include "dsl/parser.h"

namespace {

using safex::dsl::File;
using safex::dsl::Statement;
using safex::dsl::Value;

bool SameValue(const Value& a, const Value& b) {
  if (a.kind != b.kind || a.text != b.text || a.number != b.number || a.unit != b.unit ||
      a.items.size() != b.items.size()) {
    return false;
  }
  for (size_t i = 0; i < a.items.size(); ++i) {
    if (!SameValue(a.items[i], b.items[i])) return false;
  }
  return true;
}

bool SameValues(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameValue(a[i], b[i])) return false;
  }
  return true;
}

bool SameTree(const std::vector<Statement>& a, const std::vector<Statement>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Statement& x = a[i];
    const Statement& y = b[i];
    if (x.annotations.size() != y.annotations.size()) return false;
    for (size_t k = 0; k < x.annotations.size(); ++k) {
      if (x.annotations[k].name != y.annotations[k].name ||
          !SameValues(x.annotations[k].args, y.annotations[k].args)) {
        return false;
      }
    }
    if (!SameValues(x.head, y.head) || x.has_assignment != y.has_assignment ||
        x.has_block != y.has_block) {
      return false;
    }
    if (x.has_assignment && !SameValue(x.assigned, y.assigned)) return false;
    if (x.has_block && !SameTree(x.block, y.block)) return false;
  }
  return true;
}

[[noreturn]] void Die(const char* what, std::string_view input, const std::string& formatted) {
  std::fprintf(stderr, "%s\n--- input (%zu bytes)\n%.*s\n--- formatted\n%s\n", what, input.size(),
               static_cast<int>(input.size()), input.data(), formatted.c_str());
  std::abort();
}

void Check(std::string_view text, const safex::dsl::ParseLimits& limits) {
  const safex::dsl::ParseResult r = safex::dsl::Parse("fuzz.policy", text, limits);
  for (const safex::dsl::Diagnostic& d : r.diagnostics) {
    if (d.code.size() != 4 || d.code < "E001" || d.code > "E019") Die("bad code", text, d.code);
    (void)safex::dsl::RenderDiagnostic(d, text);
  }
  if (r.diagnostics.size() > limits.max_diagnostics) Die("too many diagnostics", text, "");
  if (!r.ok()) return;
  const std::string once = safex::dsl::Format(r.file);
  // Formatting may lengthen the file (spaces, indentation), never a token, a list or the depth.
  safex::dsl::ParseLimits relaxed = limits;
  if (relaxed.max_bytes < once.size()) relaxed.max_bytes = once.size();
  const safex::dsl::ParseResult again = safex::dsl::Parse("fuzz.policy", once, relaxed);
  if (!again.ok()) {
    std::string all;
    for (const auto& d : again.diagnostics) all += safex::dsl::RenderDiagnostic(d, once);
    Die(("formatted text does not parse:\n" + all).c_str(), text, once);
  }
  if (!SameTree(r.file.statements, again.file.statements)) Die("tree changed", text, once);
  if (r.file.comments.size() != again.file.comments.size()) Die("comments lost", text, once);
  if (safex::dsl::Format(again.file) != once) Die("not idempotent", text, once);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Check(text, safex::dsl::ParseLimits{});
  // Tight limits reach the depth, count, token and diagnostic caps with small inputs.
  safex::dsl::ParseLimits tight;
  tight.max_bytes = 4096;
  tight.max_depth = 3;
  tight.max_items = 4;
  tight.max_token_bytes = 12;
  tight.max_diagnostics = 3;
  Check(text, tight);
  return 0;
}
