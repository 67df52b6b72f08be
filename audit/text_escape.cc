#include "audit/text_escape.h"

#include "common/text_escape.h"
#include "common/utf8.h"

namespace safex::audit {

bool IsValidUtf8(std::string_view s) { return safex::IsValidUtf8(s); }

std::string EscapeForTerminal(std::string_view s) { return EscapeText(s); }

std::string CsvField(std::string_view s) {
  bool quote = !s.empty() && (s.front() == ' ' || s.back() == ' ');
  for (char c : s) {
    if (c == ',' || c == '"' || c == '\r' || c == '\n') quote = true;
  }
  if (!quote) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace safex::audit
