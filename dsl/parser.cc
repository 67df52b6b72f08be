#include "dsl/parser.h"

#include <cstdio>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <tao/pegtl.hpp>
#include <utility>

#include "dsl/grammar.h"
#include "dsl/parse_context.h"
#include "dsl/text.h"
#include "dsl/unit_help.h"

namespace safex::dsl {

namespace grammar {

std::string Where(const ParseContext& ctx, const char* p) {
  const Position pos = ctx.PositionAt(p);
  return std::to_string(pos.line) + ":" + std::to_string(pos.column);
}

void ApplyNumber(const char* begin, const char* end, ParseContext& ctx) {
  const std::string_view token(begin, static_cast<size_t>(end - begin));
  const Span whole = ctx.SpanOf(begin, end);
  if (token.size() > ctx.limits().max_token_bytes) {
    ctx.Fail(code::kTokenTooLong, whole,
             "number is too long (" + std::to_string(token.size()) + " bytes; the limit is " +
                 std::to_string(ctx.limits().max_token_bytes) + ")");
  }
  size_t i = 0;
  while (i < token.size() && (IsDigit(token[i]) || token[i] == '_')) ++i;
  const std::string_view digits = token.substr(0, i);
  std::string_view fraction;
  if (i < token.size() && token[i] == '.') {
    size_t j = i + 1;
    while (j < token.size() && (IsDigit(token[j]) || token[j] == '_')) ++j;
    fraction = token.substr(i + 1, j - i - 1);
    i = j;
  }
  const std::string_view unit = token.substr(i);
  auto strip = [](std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c != '_') out.push_back(c);
    }
    return out;
  };
  if (!fraction.empty()) {
    ctx.Fail(code::kMalformedNumber, whole, "fractional numbers are not supported",
             FractionHelp(strip(digits), strip(fraction), unit));
  }
  const Span digit_span = ctx.SpanOf(begin, begin + digits.size());
  if (digits.back() == '_' || digits.find("__") != std::string_view::npos) {
    ctx.Fail(code::kMalformedNumber, digit_span, "misplaced `_` in a number",
             "`_` may only separate digits, e.g. `1_000_000`");
  }
  uint64_t n = 0;
  for (char c : digits) {
    if (c == '_') continue;
    const auto d = static_cast<uint64_t>(c - '0');
    if (n > (std::numeric_limits<uint64_t>::max() - d) / 10) {
      ctx.Fail(code::kIntegerOverflow, digit_span,
               "number is too large (the largest is 18446744073709551615)");
    }
    n = n * 10 + d;
  }
  Value v;
  v.span = whole;
  v.number = n;
  if (unit.empty()) {
    v.kind = ValueKind::kInteger;
  } else {
    const UnitInfo* info = FindUnit(unit);
    if (info == nullptr) {
      ctx.Fail(code::kUnknownUnit, ctx.SpanOf(begin + i, end),
               "unknown unit `" + std::string(unit) + "`", UnitHelp(unit));
    }
    if (n > std::numeric_limits<uint64_t>::max() / info->scale) {
      const uint64_t largest = std::numeric_limits<uint64_t>::max() / info->scale;
      ctx.Fail(code::kQuantityOverflow, whole,
               "`" + std::string(token) + "` is too large: in " +
                   (info->kind == UnitKind::kSize ? "bytes" : "nanoseconds") +
                   " it does not fit in 64 bits",
               "the largest amount in " + std::string(info->name) + " is `" +
                   std::to_string(largest) + std::string(info->name) + "`");
    }
    v.kind = ValueKind::kQuantity;
    v.unit = std::string(unit);
  }
  ctx.EmitValue(std::move(v));
}

namespace {
uint32_t HexValue(char c) {
  if (c >= '0' && c <= '9') return static_cast<uint32_t>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<uint32_t>(c - 'a' + 10);
  return static_cast<uint32_t>(c - 'A' + 10);
}
}  // namespace

void CheckUnicodeEscape(const char* u, const char* end, ParseContext& ctx) {
  // u points at `u` of `\u{...}`; at most 6 hex digits, so no overflow.
  uint32_t cp = 0;
  for (const char* p = u + 2; p < end - 1; ++p) cp = cp * 16 + HexValue(*p);
  if (!text::IsScalar(cp)) {
    ctx.Fail(code::kBadEscape, ctx.SpanOf(u - 1, end),
             cp > 0x10FFFF ? "unicode escape is above U+10FFFF"
                           : "unicode escape is a surrogate, not a character",
             "a string holds Unicode scalar values: U+0000 to U+D7FF and U+E000 to U+10FFFF");
  }
}

void ApplyString(const char* begin, const char* end, ParseContext& ctx) {
  Value v;
  v.kind = ValueKind::kString;
  v.span = ctx.SpanOf(begin, end);
  const size_t body = static_cast<size_t>(end - begin) - 2;
  if (body > ctx.limits().max_token_bytes) {
    ctx.Fail(code::kTokenTooLong, ctx.CharSpan(begin),
             "string is too long (" + std::to_string(body) + " bytes; the limit is " +
                 std::to_string(ctx.limits().max_token_bytes) + ")");
  }
  // The grammar has validated every escape.
  std::string& out = v.text;
  out.reserve(body);
  for (const char* p = begin + 1; p < end - 1; ++p) {
    if (*p != '\\') {
      out.push_back(*p);
      continue;
    }
    ++p;
    switch (*p) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 'u': {
        uint32_t cp = 0;
        p += 2;  // past `u{`
        while (*p != '}') cp = cp * 16 + HexValue(*p++);
        text::AppendUtf8(&out, cp);
        break;
      }
      default:  // `"` and `\`
        out.push_back(*p);
    }
  }
  ctx.EmitValue(std::move(v));
}

void ApplyRegex(const char* begin, const char* end, ParseContext& ctx) {
  Value v;
  v.kind = ValueKind::kRegex;
  v.span = ctx.SpanOf(begin, end);
  const size_t body = static_cast<size_t>(end - begin) - 2;
  if (body == 0) {
    ctx.Fail(code::kEmptyRegex, v.span, "empty regex",
             "a regex needs a pattern; comments start with `#`, not `//`");
  }
  if (body > ctx.limits().max_token_bytes) {
    ctx.Fail(code::kTokenTooLong, ctx.CharSpan(begin),
             "regex is too long (" + std::to_string(body) + " bytes; the limit is " +
                 std::to_string(ctx.limits().max_token_bytes) + ")");
  }
  // `\/` is the escaped delimiter; every other escape is RE2's business and is kept.
  for (const char* p = begin + 1; p < end - 1; ++p) {
    if (*p == '\\' && p[1] == '/') {
      v.text.push_back('/');
      ++p;
    } else if (*p == '\\') {
      v.text.push_back('\\');
      v.text.push_back(*++p);
    } else {
      v.text.push_back(*p);
    }
  }
  ctx.EmitValue(std::move(v));
}

}  // namespace grammar

namespace {

using internal::ParseContext;
namespace code = internal::code;

// Refuses bytes that must never be in policy text, before the grammar sees them: invalid UTF-8,
// NUL and other control characters (tab, CR+LF and LF excepted), C1 controls, bidirectional
// controls and a byte order mark other than at the very start. Each run of bad bytes is one E001.
bool Prescan(std::string_view text, ParseContext& ctx) {
  bool ok = true;
  size_t i = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b >= 0x20 && b < 0x7F) {
      ++i;
      continue;
    }
    if (b == '\n' || b == '\t') {
      ++i;
      continue;
    }
    if (b == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      i += 2;
      continue;
    }
    char32_t cp = 0;
    const size_t n = text::DecodeUtf8(text, i, &cp);
    if (n > 0 && !text::IsForbiddenRaw(cp) && cp != 0xFEFF && cp != '\r') {
      i += n;
      continue;
    }
    ok = false;
    const char* p = text.data() + i;
    // One error for a run of bad bytes on one line (binary garbage is one error per line).
    size_t j = i + (n == 0 ? 1 : n);
    while (j < text.size() && text[j] != '\n') {
      char32_t next;
      const size_t m = text::DecodeUtf8(text, j, &next);
      if (m == 0) {
        ++j;
      } else if (text::IsForbiddenRaw(next) || next == 0xFEFF ||
                 (next == '\r' && !(j + 1 < text.size() && text[j + 1] == '\n'))) {
        j += m;
      } else {
        break;
      }
    }
    char buf[64];
    if (n == 0) {
      std::snprintf(buf, sizeof buf, "invalid UTF-8 (byte 0x%02x)", b);
      ctx.Report(code::kBadByte, ctx.SpanOf(p, text.data() + j), buf,
                 "policy files are UTF-8 text");
      i = j;
      continue;
    }
    std::string help;
    if (cp == 0) {
      std::snprintf(buf, sizeof buf, "NUL byte in the file");
    } else if (cp == '\r') {
      std::snprintf(buf, sizeof buf, "carriage return without a line feed");
      help = "lines end with LF or CR LF";
    } else if (cp == 0xFEFF) {
      std::snprintf(buf, sizeof buf, "byte order mark (U+FEFF) inside the file");
    } else if (cp < 0x80 || (cp >= 0x80 && cp <= 0x9F)) {
      std::snprintf(buf, sizeof buf, "control character U+%04X in the file",
                    static_cast<unsigned>(cp));
      help = "inside a string, write it as an escape such as `\\u{" + [&] {
        char h[16];
        std::snprintf(h, sizeof h, "%x", static_cast<unsigned>(cp));
        return std::string(h);
      }() + "}`";
    } else {
      std::snprintf(buf, sizeof buf, "invisible bidirectional control character U+%04X",
                    static_cast<unsigned>(cp));
      help =
          "it can make the text display differently from how it parses; inside a string, "
          "write it as an escape";
    }
    ctx.Report(code::kBadByte, ctx.SpanOf(p, text.data() + j), buf, help);
    i = j;
  }
  return ok;
}

void AddInternal(ParseResult* r, const std::string& path, const char* code, std::string msg) {
  Diagnostic d;
  d.code = code;
  d.path = path;
  d.message = std::move(msg);
  r->diagnostics.push_back(std::move(d));
}

}  // namespace

bool ParseResult::ok() const {
  for (const Diagnostic& d : diagnostics) {
    if (d.severity == Severity::kError) return false;
  }
  return true;
}

ParseResult Parse(std::string path, std::string_view text, const ParseLimits& limits) {
  ParseResult r;
  r.file.path = std::move(path);
  if (text.size() > limits.max_bytes) {
    AddInternal(&r, r.file.path, code::kTooLarge,
                "policy file is too large (" + std::to_string(text.size()) +
                    " bytes; the limit is " + std::to_string(limits.max_bytes) + ")");
    return r;
  }
  try {
    ParseContext ctx(text, limits, r.file.path, &r.file, &r.diagnostics);
    try {
      if (!Prescan(text, ctx)) return r;
      tao::pegtl::memory_input<tao::pegtl::tracking_mode::lazy, tao::pegtl::eol::lf_crlf> in(
          text.data(), text.size(), r.file.path);
      (void)tao::pegtl::parse<grammar::file, grammar::action>(in, ctx);
    } catch (const internal::FatalAbort&) {
      // The diagnostic cap or the statement cap: what was collected is the result.
      ctx.FinishAfterAbort();
    } catch (const internal::SyntaxAbort&) {
      // Only statements raise, and statement_r catches them; keep going defensively.
    } catch (const tao::pegtl::parse_error& e) {
      Diagnostic d;
      d.code = code::kUnexpected;
      d.path = r.file.path;
      d.message = "syntax error";
      if (!e.positions().empty()) {
        const auto& p = e.positions().front();
        d.span.begin.line = static_cast<uint32_t>(p.line);
        d.span.begin.column = static_cast<uint32_t>(p.column);
        d.span.begin.offset = p.byte;
        d.span.end = d.span.begin;
      }
      r.diagnostics.push_back(std::move(d));
    }
  } catch (const std::bad_alloc&) {
    AddInternal(&r, r.file.path, code::kTooLarge, "out of memory while parsing the policy");
  } catch (const std::length_error&) {
    AddInternal(&r, r.file.path, code::kTooLarge, "out of memory while parsing the policy");
  } catch (const std::exception& e) {
    AddInternal(&r, r.file.path, code::kUnexpected,
                std::string("internal error while parsing: ") + e.what());
  } catch (...) {
    AddInternal(&r, r.file.path, code::kUnexpected, "internal error while parsing");
  }
  return r;
}

}  // namespace safex::dsl
