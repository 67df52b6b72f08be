// Times in the audit log: stored as unix nanoseconds, shown as ISO-8601 UTC with milliseconds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace safex::audit {

int64_t NowNs();  // CLOCK_REALTIME

// "2026-11-29T22:26:00.123Z" (milliseconds, truncated).
std::string FormatIso8601(int64_t unix_ns);

// A time argument of `safex audit list --since/--until`:
//   ISO-8601: "2026-11-29", "2026-11-29T22:26", "2026-11-29T22:26:00", with optional ".fraction"
//             and an optional zone "Z" or "+HH:MM"/"-HH:MM" (no zone means UTC); a space may
//             stand for the "T";
//   relative: N followed by s, m, h, d or w, meaning that long before `now_ns` ("7d", "90m");
//   "now".
// InvalidArgument names what is wrong.
Result<int64_t> ParseTimeArg(std::string_view text, int64_t now_ns);

}  // namespace safex::audit
