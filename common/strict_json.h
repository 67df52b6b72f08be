// One strict JSON reader for everything safex parses from outside itself: requests to the
// service, plans read back, run records and checkpoint files on disk, JSON columns of the audit
// log. The text must be exactly one JSON document (RFC 8259) and:
//   - start with the document: a leading UTF-8 byte order mark is refused (RFC 8259 §8.1 lets
//     parsers ignore one, nlohmann does, and another reader may not);
//   - have no duplicate object member names at any depth (§4 leaves their meaning undefined:
//     nlohmann keeps the last, other readers the first, so a checker and a user of the same text
//     could see different values);
//   - hold only UTF-8 strings and nothing after the document (nlohmann's own rules);
//   - nest arrays and objects at most max_depth deep;
//   - with integers_only, hold no number with a fraction or exponent and no integer beyond
//     int64/uint64 (nlohmann would turn it into a lossy double).
// Never throws.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

#include "common/status.h"

namespace safex {

struct StrictJsonOptions {
  size_t max_depth = 32;
  bool integers_only = false;
};

// The document, or InvalidArgument whose message says what is wrong and where: "byte N: ..."
// for syntax, or e.g. "duplicate key \"a\"", "a byte order mark ...", "nesting deeper than 32".
Result<nlohmann::json> ParseStrictJson(std::string_view text,
                                       const StrictJsonOptions& options = {});

}  // namespace safex
