// Parses policy text into a dsl::File. Safe on hostile text: bounded size, nesting depth, list
// length and token length; integer overflow is an error; never recurses without a bound; never
// throws (PEGTL's parse_error is caught here and becomes a diagnostic).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/ast.h"
#include "dsl/diagnostics.h"

namespace safex::dsl {

struct ParseLimits {
  uint64_t max_bytes = 1 << 20;      // 1 MiB of policy text
  uint32_t max_depth = 16;           // nested blocks + nested lists
  uint32_t max_items = 4096;         // items in one list, statements in one block
  uint32_t max_token_bytes = 4096;   // one string, regex or identifier
  uint32_t max_diagnostics = 100;    // stop collecting after this many
};

struct ParseResult {
  File file;                          // best-effort tree even when there are errors
  std::vector<Diagnostic> diagnostics;
  bool ok() const;                    // no error-severity diagnostics
};

ParseResult Parse(std::string path, std::string_view text, const ParseLimits& limits = {});

// Units known to the grammar, and their scale to base units (bytes or nanoseconds).
enum class UnitKind { kSize, kDuration };
struct UnitInfo {
  std::string_view name;
  UnitKind kind;
  uint64_t scale;
};
const std::vector<UnitInfo>& Units();

// The unit called exactly `name` (case-sensitive: `m` is minutes, `M` is unknown), or nullptr.
const UnitInfo* FindUnit(std::string_view name);

// The value of a kQuantity in base units (bytes or nanoseconds): number * scale. Returns false,
// leaving *out untouched, when v is not a quantity, its unit is unknown, or the product does not
// fit in 64 bits. (Parse() already rejects quantities that overflow, with E009.)
bool ToBaseUnits(const Value& v, uint64_t* out);

}  // namespace safex::dsl
