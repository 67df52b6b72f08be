#include "supervisor/output/text_scan.h"

#include <cstdio>
#include <cstring>

#include "supervisor/output/utf8.h"

namespace safex::output {
namespace {

constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHighs = 0x8080808080808080ULL;

// True when all 8 bytes are printable ASCII (0x20..0x7E): nothing to look at.
inline bool PrintableAscii8(uint64_t x) {
  if (x & kHighs) return false;                        // a byte >= 0x80
  if ((x - kOnes * 0x20) & ~x & kHighs) return false;  // a byte < 0x20
  return ((x + kOnes) & kHighs) == 0;                  // 0x7F + 1 sets the high bit, no carries
}

// After CSI's introducer: parameters 0x30..0x3F, intermediates 0x20..0x2F, one final 0x40..0x7E.
// A malformed sequence ends at the first byte that does not fit (that byte is scanned on its own).
uint64_t CsiEnd(const unsigned char* b, uint64_t n, uint64_t j) {
  while (j < n && b[j] >= 0x30 && b[j] <= 0x3F) ++j;
  while (j < n && b[j] >= 0x20 && b[j] <= 0x2F) ++j;
  if (j < n && b[j] >= 0x40 && b[j] <= 0x7E) ++j;
  return j;
}

// After an OSC/DCS/SOS/PM/APC introducer: the string runs to BEL or ST (ESC \ or U+009C); CAN and
// SUB abort it; another ESC ends it (and is scanned on its own); unterminated, it runs to the end.
uint64_t ControlStringEnd(const unsigned char* b, uint64_t n, uint64_t j) {
  for (; j < n; ++j) {
    const unsigned char c = b[j];
    if (c == 0x07 || c == 0x18 || c == 0x1A) return j + 1;
    if (c == 0x1B) return (j + 1 < n && b[j + 1] == '\\') ? j + 2 : j;
    if (c == 0xC2 && j + 1 < n && b[j + 1] == 0x9C) return j + 2;
  }
  return n;
}

// The end of a sequence started by C1 control `c1` (0x80..0x9F) whose encoding ends at j.
uint64_t C1End(const unsigned char* b, uint64_t n, uint32_t c1, uint64_t j, const char** kind) {
  switch (c1) {
    case 0x9B:
      *kind = "C1 CSI sequence";
      return CsiEnd(b, n, j);
    case 0x9D:
      *kind = "C1 OSC string";
      return ControlStringEnd(b, n, j);
    case 0x90:
      *kind = "C1 DCS string";
      return ControlStringEnd(b, n, j);
    case 0x98:
    case 0x9E:
    case 0x9F:
      *kind = "C1 control string";
      return ControlStringEnd(b, n, j);
    default:
      *kind = "C1 control";
      return j;
  }
}

// b[i] is ESC.
uint64_t EscapeEnd(const unsigned char* b, uint64_t n, uint64_t i, const char** kind) {
  uint64_t j = i + 1;
  *kind = "ESC";
  if (j >= n) return j;
  const unsigned char c = b[j];
  switch (c) {
    case '[':
      *kind = "escape sequence (CSI)";
      return CsiEnd(b, n, j + 1);
    case ']':
      *kind = "escape sequence (OSC)";
      return ControlStringEnd(b, n, j + 1);
    case 'P':
      *kind = "escape sequence (DCS)";
      return ControlStringEnd(b, n, j + 1);
    case 'X':
    case '^':
    case '_':
      *kind = "escape sequence (control string)";
      return ControlStringEnd(b, n, j + 1);
    default:
      break;
  }
  if (c >= 0x20 && c <= 0x2F) {
    while (j < n && b[j] >= 0x20 && b[j] <= 0x2F) ++j;
    if (j < n && b[j] >= 0x30 && b[j] <= 0x7E) ++j;
    *kind = "escape sequence";
    return j;
  }
  if (c >= 0x30 && c <= 0x7E) {
    *kind = "escape sequence";
    return j + 1;
  }
  return j;  // a lone ESC; what follows is scanned on its own
}

std::string Describe(const char* kind, uint32_t cp) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s U+%04X", kind, static_cast<unsigned>(cp));
  return buf;
}

// Lines without any per-byte checks: memchr for '\n'.
void CountLinesOnly(std::string_view text, const ScanOptions& o, ScanResult* r) {
  uint64_t newlines = 0;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    const void* nl = std::memchr(p, '\n', static_cast<size_t>(end - p));
    if (nl == nullptr) break;
    p = static_cast<const char*>(nl) + 1;
    ++newlines;
    if (o.max_lines != 0 && newlines == o.max_lines) {
      r->line_cut = static_cast<uint64_t>(p - text.data());
      if (r->line_cut < text.size()) {
        r->lines_exceeded = true;
      }
    }
  }
  r->lines = newlines + ((!text.empty() && text.back() != '\n') ? 1 : 0);
}

std::string Utf8Problem(Utf8Status status, unsigned char byte) {
  if (status == Utf8Status::kTruncated) return "UTF-8 sequence cut short by the end of the text";
  char what[80];
  std::snprintf(what, sizeof what, "invalid UTF-8 byte 0x%02x", byte);
  return what;
}

// After the scan: the rest of the text into the output (strip mode), then the line count of what
// is kept and whether it goes past the line limit.
void Finish(std::string_view text, uint64_t copied, uint64_t newlines, bool cut_seen,
            ScanResult* r) {
  const uint64_t kept_end = text.size() - r->partial_tail_dropped;
  if (r->modified) r->output.append(text.data() + copied, kept_end - copied);
  const uint64_t out_len = kept_end - r->bytes_removed;
  char last = 0;
  if (out_len > 0) last = r->modified ? r->output.back() : text[kept_end - 1];
  r->lines = newlines + ((out_len > 0 && last != '\n') ? 1 : 0);
  r->lines_exceeded = cut_seen && out_len > r->line_cut;
}

}  // namespace

ScanResult ScanText(std::string_view text, const ScanOptions& o) {
  ScanResult r;
  if (!o.utf8 && o.control == plan::ControlChars::kAllow) {
    CountLinesOnly(text, o, &r);
    return r;
  }
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  const uint64_t n = text.size();
  const bool check_controls = o.control != plan::ControlChars::kAllow;
  const bool reject = o.control == plan::ControlChars::kReject;
  uint64_t i = 0;
  uint64_t copied = 0;  // input offset up to which `output` holds the text (strip mode)
  uint64_t newlines = 0;
  bool cut_seen = false;

  // A control at [from, to): reject it (returns false) or strip it. `kind` and `cp` describe it;
  // the text is only formatted when it is reported (hostile output may hold millions of them).
  auto control = [&](uint64_t from, uint64_t to, const char* kind, int64_t cp) {
    auto what = [&] {
      return cp < 0 ? std::string(kind) : Describe(kind, static_cast<uint32_t>(cp));
    };
    if (reject) {
      r.control_error = ScanProblem{from, newlines + 1, what()};
      return false;
    }
    if (!r.modified) {
      r.modified = true;
      r.output.reserve(n);
    }
    r.output.append(text.data() + copied, from - copied);
    copied = to;
    r.bytes_removed += to - from;
    ++r.controls_removed;
    if (!r.first_removed) r.first_removed = ScanProblem{from, newlines + 1, what()};
    return true;
  };

  while (i < n) {
    while (n - i >= 8) {
      uint64_t x;
      std::memcpy(&x, b + i, 8);
      if (!PrintableAscii8(x)) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = b[i];
    if (c >= 0x20 && c < 0x7F) {
      ++i;
      continue;
    }
    if (c == '\n') {
      ++newlines;
      ++i;
      if (o.max_lines != 0 && newlines == o.max_lines) {
        cut_seen = true;
        r.line_cut = i - r.bytes_removed;
      }
      continue;
    }
    if (c == '\t') {
      ++i;
      continue;
    }
    if (c < 0x80) {  // other C0 controls, DEL
      if (c == '\r' &&
          (o.carriage_return == CarriageReturn::kAllow ||
           (o.carriage_return == CarriageReturn::kCrlfOnly && i + 1 < n && b[i + 1] == '\n'))) {
        ++i;
        continue;
      }
      if (!check_controls) {
        ++i;
        continue;
      }
      // ESC takes its whole sequence with it; any other C0 control is one byte.
      const char* kind = "control character";
      const uint64_t end = c == 0x1B ? EscapeEnd(b, n, i, &kind) : i + 1;
      if (!control(i, end, kind, c == 0x1B ? -1 : c)) return r;
      i = end;
      continue;
    }
    const Utf8Char u = DecodeUtf8(b + i, b + n);
    if (u.status == Utf8Status::kOk) {
      const uint32_t cp = u.code_point;
      if (check_controls && cp <= 0x9F) {
        const char* kind = "";
        const uint64_t end = C1End(b, n, cp, i + u.length, &kind);
        if (!control(i, end, kind, cp)) return r;
        i = end;
        continue;
      }
      if (check_controls && IsBidiControl(cp)) {
        if (!control(i, i + u.length, "bidirectional control", cp)) return r;
      }
      i += u.length;
      continue;
    }
    if (o.utf8) {
      if (u.status == Utf8Status::kTruncated && o.input_truncated) {
        r.partial_tail_dropped = u.length;  // the cut's doing, not the program's
        break;
      }
      r.utf8_error = ScanProblem{i, newlines + 1, Utf8Problem(u.status, c)};
      return r;
    }
    // Not UTF-8 checked: a raw 0x80..0x9F acts as a C1 control on an 8-bit terminal.
    if (check_controls && c <= 0x9F) {
      const char* kind = "";
      const uint64_t end = C1End(b, n, c, i + 1, &kind);
      if (!control(i, end, kind, c)) return r;
      i = end;
      continue;
    }
    ++i;
  }

  Finish(text, copied, newlines, cut_seen, &r);
  return r;
}

}  // namespace safex::output
