// Escaped text is safe for logs and terminals: valid UTF-8, no control characters, no C1 controls,
// no invisible formatting characters, and within max_output plus the marker.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "supervisor/output/escape.h"
#include "supervisor/output/utf8.h"

using safex::output::DecodeUtf8;
using safex::output::Utf8Char;
using safex::output::Utf8Status;

static void CheckSafe(const std::string& s, bool keep_newlines) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const Utf8Char c = DecodeUtf8(p, end);
    if (c.status != Utf8Status::kOk) abort();
    const uint32_t cp = c.code_point;
    if (cp < 0x20 && !(keep_newlines && cp == '\n')) abort();
    if (cp >= 0x7F && cp <= 0x9F) abort();
    if (safex::output::IsInvisibleFormat(cp)) abort();
    p += c.length;
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  safex::output::EscapeOptions o;
  o.keep_newlines = data[0] & 1;
  o.escape_double_quote = data[0] & 2;
  o.max_output = (data[0] & 4) ? data[0] : 0;
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string out = safex::output::EscapeForLog(in, o);
  CheckSafe(out, o.keep_newlines);
  if (o.max_output != 0 && out.size() > o.max_output + 32) abort();
  if (o.max_output == 0 && out.size() < in.size()) abort();  // nothing is ever dropped
  if (o.escape_double_quote) {
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] == '"') {
        size_t backslashes = 0;
        for (size_t j = i; j > 0 && out[j - 1] == '\\'; --j) ++backslashes;
        if (backslashes % 2 == 0) abort();  // an unescaped quote
      }
    }
  }
  return 0;
}
