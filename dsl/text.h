// UTF-8 helpers shared by the parser, the diagnostics renderer and the formatter. Internal to dsl/
// (not part of its public API).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace safex::dsl::text {

// Decodes the UTF-8 sequence starting at s[i]. Returns its length (1-4) and stores the scalar in
// *cp, or returns 0 when the bytes there are not valid UTF-8 (truncated, overlong, surrogate,
// above U+10FFFF, stray continuation byte). REQUIRES: i < s.size().
size_t DecodeUtf8(std::string_view s, size_t i, char32_t* cp);

// Appends the UTF-8 encoding of a Unicode scalar value.
void AppendUtf8(std::string* out, char32_t cp);

// True for a valid scalar (not a surrogate, at most U+10FFFF).
bool IsScalar(char32_t cp);

// Characters that must never appear raw in policy text, and that are escaped whenever text is
// shown: C0 controls other than tab, line feed and carriage return; DEL; C1 controls; and the
// invisible bidirectional controls that can make source read differently from how it parses
// ("Trojan Source").
bool IsForbiddenRaw(char32_t cp);

// Makes text safe to print on a terminal: forbidden characters (and tab, LF, CR when
// keep_tabs is false; tab is kept as-is when keep_tabs is true) become \t, \n, \r, \x1b or
// \u{202e}; each invalid UTF-8 byte becomes \xNN. Everything else is copied.
std::string EscapeForTerminal(std::string_view s, bool keep_tabs = false);

// Number of Unicode scalars in valid UTF-8 text (an approximation of its width in columns).
size_t Utf8Length(std::string_view s);

}  // namespace safex::dsl::text
