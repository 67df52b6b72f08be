// A strict RFC 8259 JSON checker for hostile documents. It only checks (it builds no tree) and it
// never recurses: nesting is tracked on an explicit, heap-allocated stack whose depth is capped,
// so a 100,000-deep document is rejected at the cap, promptly, with the JSON path of the offending
// container. Memory is bounded by the input size (keys of open objects are kept to detect
// duplicates).
//
// Strictness decisions (each one is a rejection with a path and byte offset):
// - grammar exactly as RFC 8259: no comments, no trailing commas, no single quotes, no NaN or
//   Infinity, no leading zeros or '+', no byte order mark, nothing but whitespace after the value;
// - strings: valid UTF-8 (RFC 3629), no unescaped control characters, only the escapes of §7,
//   \u surrogates must come in high+low pairs (a lone surrogate is rejected);
// - duplicate keys in one object are rejected (parsers disagree on which one wins, so a checker
//   and a consumer could see different values); keys are compared after unescaping;
// - numbers are checked by grammar only and never converted, so 1e999999 is valid; a number
//   longer than max_number_chars is rejected (some consumers convert big integers in quadratic
//   time);
// - any value is allowed at the top level unless required keys are given, which requires an
//   object at the top level.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace safex::output {

struct JsonCheckOptions {
  uint64_t max_depth = 64;  // containers open at once; the top-level value's container is depth 1
  uint64_t max_bytes = 0;   // 0: no size cap here
  uint64_t max_number_chars = 4096;
  // Required top-level keys and their types: string|number|integer|boolean|object|array|null.
  // "integer" is a number without fraction or exponent; an integer also satisfies "number".
  std::map<std::string, std::string> required;
};

struct JsonCheckResult {
  bool ok = true;
  uint64_t offset = 0;  // byte offset of the first problem
  std::string path;     // JSON path of the value where it is, "$" for the top level (escaped)
  std::string message;  // what is wrong (escaped; safe for logs)
};

JsonCheckResult CheckJson(std::string_view text, const JsonCheckOptions& options);

// Whether `type` is one of the type names a `require` clause may use.
bool IsKnownJsonType(std::string_view type);

}  // namespace safex::output
