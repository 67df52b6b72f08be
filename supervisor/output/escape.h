// The output validators' names for the project's one escaper (common/text_escape.h).
#pragma once

#include <string>
#include <string_view>

#include "common/text_escape.h"

namespace safex::output {

using safex::EscapeOptions;

inline std::string EscapeForLog(std::string_view bytes, const EscapeOptions& options = {}) {
  return EscapeText(bytes, options);
}
inline void AppendEscaped(std::string* out, std::string_view bytes,
                          const EscapeOptions& options = {}) {
  AppendEscapedText(out, bytes, options);
}

}  // namespace safex::output
