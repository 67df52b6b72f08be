#include "dsl/text.h"

#include <cstdint>

#include "common/text_escape.h"
#include "common/utf8.h"

namespace safex::dsl::text {

size_t DecodeUtf8(std::string_view s, size_t i, char32_t* cp) {
  uint32_t v = 0;
  const size_t n = DecodeUtf8At(s, i, &v);  // common/utf8.h: the project's one decoder
  if (n != 0) *cp = v;
  return n;
}

void AppendUtf8(std::string* out, char32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsScalar(char32_t cp) { return cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF); }

bool IsForbiddenRaw(char32_t cp) {
  if (cp < 0x20) return cp != '\t' && cp != '\n' && cp != '\r';
  if (cp >= 0x7F && cp <= 0x9F) return true;  // DEL and C1 (some terminals read 0x9B as CSI)
  // Bidirectional controls: ARABIC LETTER MARK, LRM, RLM, LRE..RLO, LRI..PDI.
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

std::string EscapeForTerminal(std::string_view s, bool keep_tabs) {
  EscapeOptions o;
  o.keep_tabs = keep_tabs;
  o.escape_backslash = false;  // the author's regular expressions, shown as written
  return EscapeText(s, o);
}

size_t Utf8Length(std::string_view s) {
  size_t n = 0;
  for (char c : s) {
    if ((static_cast<uint8_t>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

}  // namespace safex::dsl::text
