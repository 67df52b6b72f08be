// Escaping hostile bytes before they reach a log line, a table or a terminal. Program output,
// file names from an output mount and argv are all attacker-controlled: a raw ESC can rewrite the
// operator's terminal, a '\n' can forge a log line, invalid UTF-8 can break JSON encoders.
//
// What passes unchanged: printable ASCII, and valid UTF-8 characters that are neither controls
// nor invisible formatting characters. Everything else is written as an escape:
//   '\\' -> \\    '\n' -> \n   '\t' -> \t   '\r' -> \r
//   other C0 controls, DEL, ESC             -> \xNN
//   C1 controls (U+0080..U+009F)            -> \u0080 .. \u009f
//   bidi overrides/isolates, zero-width characters, U+2028/9, BOM -> \u202e etc.
//   each byte of invalid or truncated UTF-8 -> \xNN
// The result is valid UTF-8 with no control characters (safe to embed in JSON and logs).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace safex::output {

struct EscapeOptions {
  // 0: unlimited. Otherwise the escaped text is at most this many bytes plus a marker
  // "...[N more bytes]" naming how many input bytes were left out; never cuts an escape in half.
  size_t max_output = 0;
  // Leave '\n' as it is (multi-line displays that are not log lines).
  bool keep_newlines = false;
  // Also escape '"' as \" (for text placed between double quotes).
  bool escape_double_quote = false;
};

std::string EscapeForLog(std::string_view bytes, const EscapeOptions& options = {});
// Appends the escaped form of `bytes` to *out. Same rules; max_output counts only what is appended.
void AppendEscaped(std::string* out, std::string_view bytes, const EscapeOptions& options = {});

}  // namespace safex::output
