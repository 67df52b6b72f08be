#include "common/text_escape.h"

#include <cstdint>
#include <cstdio>

#include "common/utf8.h"

namespace safex {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendHexByte(std::string* out, unsigned char b) {
  out->append("\\x");
  out->push_back(kHex[b >> 4]);
  out->push_back(kHex[b & 0xF]);
}

void AppendCodePoint(std::string* out, uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u{%x}", static_cast<unsigned>(cp));
  out->append(buf);
}

}  // namespace

void AppendEscapedText(std::string* out, std::string_view bytes, const EscapeOptions& options) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto* end = p + bytes.size();
  const size_t start_size = out->size();
  std::string piece;
  while (p < end) {
    piece.clear();
    size_t consumed = 1;
    const unsigned char b = *p;
    if (b >= 0x20 && b < 0x7F) {
      if (b == '\\' && options.escape_backslash) {
        piece = "\\\\";
      } else if (b == '"' && options.escape_double_quote) {
        piece = "\\\"";
      } else {
        piece.push_back(static_cast<char>(b));
      }
    } else if (b < 0x80) {
      switch (b) {
        case '\n':
          piece = options.keep_newlines ? "\n" : "\\n";
          break;
        case '\t':
          piece = options.keep_tabs ? "\t" : "\\t";
          break;
        case '\r':
          piece = "\\r";
          break;
        default:
          AppendHexByte(&piece, b);
          break;
      }
    } else {
      const Utf8Char c = DecodeUtf8(p, end);
      if (c.status != Utf8Status::kOk) {
        AppendHexByte(&piece, b);  // one byte at a time: resynchronise on the next
      } else {
        consumed = c.length;
        if (c.code_point <= 0x9F || IsInvisibleFormat(c.code_point)) {
          AppendCodePoint(&piece, c.code_point);
        } else {
          piece.assign(reinterpret_cast<const char*>(p), c.length);
        }
      }
    }
    if (options.max_output != 0 && out->size() - start_size + piece.size() > options.max_output) {
      const size_t left = static_cast<size_t>(end - p);
      out->append("...[" + std::to_string(left) + " more bytes]");
      return;
    }
    out->append(piece);
    p += consumed;
  }
}

std::string EscapeText(std::string_view bytes, const EscapeOptions& options) {
  std::string out;
  out.reserve(bytes.size() + 8);
  AppendEscapedText(&out, bytes, options);
  return out;
}

}  // namespace safex
