// Escaping hostile bytes before they reach a log line, a table, a terminal or a diagnostic: the
// one escaper of the project (the service's log, `safex audit`, the policy diagnostics and the
// output validators' reports all use it, so an operator meets one notation everywhere).
//
// Program output, file names from an output mount, argv and policy text are attacker-controlled:
// a raw ESC can rewrite the operator's terminal, a '\n' can forge a log line, a bidi override can
// make text read differently from what it is, invalid UTF-8 can break JSON encoders.
//
// What passes unchanged: printable ASCII, and valid UTF-8 characters that are neither controls
// nor invisible formatting characters. Everything else is written as an escape:
//   '\\' -> \\    '\n' -> \n   '\t' -> \t   '\r' -> \r
//   other C0 controls, DEL, ESC                              -> \xNN
//   C1 controls (U+0080..U+009F), bidi overrides/isolates, zero-width characters, U+2028/9, the
//   BOM and other invisible formatting characters           -> \u{80}, \u{202e}
//   each byte of invalid or truncated UTF-8                  -> \xNN
// The result is valid UTF-8 with no control characters (safe to embed in JSON and logs).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace safex {

struct EscapeOptions {
  // 0: unlimited. Otherwise the escaped text is at most this many bytes plus a marker
  // "...[N more bytes]" naming how many input bytes were left out; never cuts an escape in half.
  size_t max_output = 0;
  // Leave '\n' as it is (multi-line displays that are not log lines).
  bool keep_newlines = false;
  // Leave '\t' as it is (a source line shown under a caret).
  bool keep_tabs = false;
  // Also escape '"' as \" (for text placed between double quotes).
  bool escape_double_quote = false;
  // Write '\\' as "\\\\" (so that an escape cannot be forged). Off only for showing policy
  // source, whose regular expressions are full of backslashes the author must see as written.
  bool escape_backslash = true;
};

std::string EscapeText(std::string_view bytes, const EscapeOptions& options = {});
// Appends the escaped form of `bytes` to *out. Same rules; max_output counts only what is appended.
void AppendEscapedText(std::string* out, std::string_view bytes, const EscapeOptions& options = {});

}  // namespace safex
