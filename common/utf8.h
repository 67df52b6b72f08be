// Strict UTF-8 decoding (RFC 3629): no overlong forms, no surrogates (U+D800..U+DFFF), nothing
// above U+10FFFF. The one decoder of the project: the stream scanner, the JSON checker, the log
// escaper and the drivers' argv checks all agree on what "valid UTF-8" means.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace safex {

enum class Utf8Status : uint8_t {
  kOk,
  kInvalid,    // the byte at p cannot start a sequence here, or a continuation byte is wrong
  kTruncated,  // a valid prefix of a sequence runs into the end of the input
};

struct Utf8Char {
  Utf8Status status;
  // kOk: length of the sequence (1..4). kInvalid: 1 (resynchronise at the next byte).
  // kTruncated: the number of bytes left in the input (all of them belong to the cut sequence).
  uint8_t length;
  uint32_t code_point;  // valid when status == kOk
};

// REQUIRES: p < end.
inline Utf8Char DecodeUtf8(const unsigned char* p, const unsigned char* end) {
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return {Utf8Status::kOk, 1, b0};
  size_t need = 0;
  uint32_t cp = 0;
  unsigned char lo = 0x80;  // bounds of the first continuation byte (excludes overlongs etc.)
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0)
      lo = 0xA0;  // overlong
    else if (b0 == 0xED)
      hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0)
      lo = 0x90;  // overlong
    else if (b0 == 0xF4)
      hi = 0x8F;  // above U+10FFFF
  } else {
    return {Utf8Status::kInvalid, 1, 0};  // 80..C1 (continuation, overlong lead), F5..FF
  }
  const size_t avail = static_cast<size_t>(end - p) - 1;
  for (size_t k = 0; k < need; ++k) {
    if (k >= avail) return {Utf8Status::kTruncated, static_cast<uint8_t>(avail + 1), 0};
    const unsigned char c = p[1 + k];
    if (c < (k == 0 ? lo : 0x80) || c > (k == 0 ? hi : 0xBF)) {
      return {Utf8Status::kInvalid, 1, 0};
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  return {Utf8Status::kOk, static_cast<uint8_t>(need + 1), cp};
}

// Invisible characters that change how surrounding text is displayed (bidirectional overrides
// and isolates, zero-width characters, line/paragraph separators, the BOM): the "Trojan Source"
// family. Logs escape them; control = strip|reject treats the bidi ones as controls.
inline bool IsBidiControl(uint32_t cp) {
  return (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}
inline bool IsInvisibleFormat(uint32_t cp) {
  return IsBidiControl(cp) || (cp >= 0x200B && cp <= 0x200F) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x2060 && cp <= 0x2064) || cp == 0xFEFF || cp == 0x061C || cp == 0x00AD;
}

// The sequence at s[i]: its length, with *cp set; 0 when it is not valid (or cut short).
inline size_t DecodeUtf8At(std::string_view s, size_t i, uint32_t* cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  Utf8Char c = DecodeUtf8(p, reinterpret_cast<const unsigned char*>(s.data()) + s.size());
  if (c.status != Utf8Status::kOk) return 0;
  *cp = c.code_point;
  return c.length;
}

// Whether all of `s` is strict UTF-8.
inline bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    Utf8Char c = DecodeUtf8(p, end);
    if (c.status != Utf8Status::kOk) return false;
    p += c.length;
  }
  return true;
}

}  // namespace safex
