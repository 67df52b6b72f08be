// Presentation helpers for auditor output: log contents are hostile (argv and reasons come from
// untrusted requests), so nothing read from the log reaches a terminal unescaped.
#pragma once

#include <string>
#include <string_view>

namespace safex::audit {

// RFC 3629 UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool IsValidUtf8(std::string_view s);

// Safe for a terminal: the project's one escaper (common/text_escape.h). The result contains no
// control character at all.
std::string EscapeForTerminal(std::string_view s);

// One field of RFC 4180 CSV: quoted (with inner quotes doubled) when it contains a comma, a
// double quote, CR or LF, or starts or ends with a space; otherwise as is.
std::string CsvField(std::string_view s);

}  // namespace safex::audit
