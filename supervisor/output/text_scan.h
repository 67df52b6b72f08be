// One pass over a stream for the byte-level validators: UTF-8 validity, control characters and
// terminal escape sequences (allow, strip or reject), and line counting. Internal to
// supervisor/output (stream_validator.cc is the caller); exposed for tests, fuzzing and benchmarks.
//
// What counts as a control (control = strip|reject):
// - C0 controls and DEL, except '\n', '\t' and (see CarriageReturn) '\r';
// - ESC and the whole sequence it starts: CSI (ESC [ params intermediates final),
// OSC/DCS/SOS/PM/APC
//   strings (ESC ] P X ^ _ ... up to BEL, ST = ESC \ or U+009C; CAN/SUB abort; unterminated strings
//   run to the end of the text), and other escape sequences (ESC intermediates final);
// - C1 controls U+0080..U+009F (UTF-8 encoded; U+009B, U+009D etc. start sequences like their
//   ESC forms), and, when utf8 is not checked, raw bytes 0x80..0x9F (8-bit terminals obey them);
// - bidirectional overrides and isolates U+202A..U+202E, U+2066..U+2069 ("Trojan Source").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "plan/plan.h"

namespace safex::output {

// What a '\r' is. kCrlfOnly: a '\r' directly before '\n' is a line ending; any other '\r' is a
// control (it lets a program overwrite what a person sees on a terminal line).
enum class CarriageReturn { kControl, kCrlfOnly, kAllow };

struct ScanOptions {
  bool utf8 = false;
  plan::ControlChars control = plan::ControlChars::kAllow;
  CarriageReturn carriage_return = CarriageReturn::kCrlfOnly;
  uint64_t max_lines = 0;  // 0: lines are counted but not capped
  // The text was cut (by the capture or a size cap): with utf8 on, a valid but incomplete UTF-8
  // sequence at the very end is the cut's doing, so it is dropped from the output, not rejected.
  bool input_truncated = false;
};

struct ScanProblem {
  uint64_t offset = 0;  // byte offset in the scanned text
  uint64_t line = 0;    // 1-based
  std::string what;     // e.g. "invalid UTF-8 byte 0xc0", "escape sequence (CSI)"
};

struct ScanResult {
  std::optional<ScanProblem> utf8_error;     // utf8 on: the first invalid sequence (scan stops)
  std::optional<ScanProblem> control_error;  // control = reject: the first control (scan stops)
  // control = strip: what was removed.
  uint64_t controls_removed = 0;  // characters or sequences
  uint64_t bytes_removed = 0;
  std::optional<ScanProblem> first_removed;
  uint64_t partial_tail_dropped = 0;  // bytes of a UTF-8 sequence cut by truncation
  // Lines of the output ('\n' count, plus one for a final line without '\n').
  uint64_t lines = 0;
  bool lines_exceeded = false;  // max_lines set and the output goes on after the max_lines-th line
  uint64_t line_cut = 0;        // when lines_exceeded: output length that keeps max_lines lines

  bool modified = false;  // output holds the stripped text
  std::string output;

  // The text after stripping and dropping a cut tail (not yet cut to max_lines).
  std::string_view Output(std::string_view input) const {
    if (modified) return output;
    return input.substr(0, input.size() - partial_tail_dropped);
  }
  bool rejected() const { return utf8_error.has_value() || control_error.has_value(); }
};

ScanResult ScanText(std::string_view text, const ScanOptions& options);

}  // namespace safex::output
