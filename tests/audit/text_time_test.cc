// Output escaping, CSV quoting, time parsing/formatting and the verdict list.
#include <gtest/gtest.h>

#include <set>

#include "audit/text_escape.h"
#include "audit/time_format.h"
#include "audit/verdict.h"

namespace safex::audit {
namespace {

TEST(EscapeTest, TerminalOutputHasNoControlCharacters) {
  EXPECT_EQ(EscapeForTerminal("plain text"), "plain text");
  EXPECT_EQ(EscapeForTerminal("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(EscapeForTerminal("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(EscapeForTerminal("back\\slash"), "back\\\\slash");
  EXPECT_EQ(EscapeForTerminal("caf\xc3\xa9"), "caf\xc3\xa9");  // printable UTF-8 kept
  EXPECT_EQ(EscapeForTerminal("\xff\xfe"), "\\xff\\xfe");      // not UTF-8
  EXPECT_EQ(EscapeForTerminal("\xc2\x9b"), "\\u{9b}");         // C1 CSI
  EXPECT_EQ(EscapeForTerminal("\xe2\x80\xae"), "\\u{202e}");   // right-to-left override
  EXPECT_EQ(EscapeForTerminal(std::string("\0\x7f", 2)), "\\x00\\x7f");
  // No byte below 0x20 and no DEL survives, whatever the input.
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (char c : EscapeForTerminal(all)) {
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f);
  }
}

TEST(EscapeTest, Utf8Validation) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated
}

TEST(EscapeTest, CsvFieldFollowsRfc4180) {
  EXPECT_EQ(CsvField("abc"), "abc");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("line\nbreak"), "\"line\nbreak\"");
  EXPECT_EQ(CsvField("cr\r"), "\"cr\r\"");
  EXPECT_EQ(CsvField(" padded"), "\" padded\"");
}

TEST(TimeTest, FormatsIsoUtcWithMilliseconds) {
  EXPECT_EQ(FormatIso8601(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatIso8601(1'764'455'160'123'456'789), "2025-11-29T22:26:00.123Z");
}

TEST(TimeTest, ParsesIsoForms) {
  const int64_t s = 1'000'000'000;
  EXPECT_EQ(*ParseTimeArg("1970-01-02", 0), 86400 * s);
  EXPECT_EQ(*ParseTimeArg("2025-11-29T22:26:00Z", 0), 1'764'455'160 * s);
  EXPECT_EQ(*ParseTimeArg("2025-11-29T22:26:00.5Z", 0), 1'764'455'160 * s + s / 2);
  EXPECT_EQ(*ParseTimeArg("2025-11-29 22:26:00", 0), 1'764'455'160 * s);
  EXPECT_EQ(*ParseTimeArg("2025-11-29T22:26", 0), 1'764'455'160 * s);
  EXPECT_EQ(*ParseTimeArg("2025-11-30T00:26:00+02:00", 0), 1'764'455'160 * s);
  EXPECT_EQ(*ParseTimeArg("2024-02-29", 0), *ParseTimeArg("2024-03-01", 0) - 86400 * s);
  for (const char* bad :
       {"", "2025-13-01", "2025-02-30", "2023-02-29", "2025-1-1", "yesterday", "2025-11-29T25:00",
        "2025-11-29Tx", "2025-11-29T22:26:00+2", "7y", "d", "-7d", "99999999999999999999d"}) {
    auto r = ParseTimeArg(bad, 0);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << bad;
  }
}

TEST(TimeTest, ParsesRelativeForms) {
  const int64_t now = 1'764'455'160'000'000'000;
  const int64_t s = 1'000'000'000;
  EXPECT_EQ(*ParseTimeArg("now", now), now);
  EXPECT_EQ(*ParseTimeArg("30s", now), now - 30 * s);
  EXPECT_EQ(*ParseTimeArg("90m", now), now - 90 * 60 * s);
  EXPECT_EQ(*ParseTimeArg("12h", now), now - 12 * 3600 * s);
  EXPECT_EQ(*ParseTimeArg("7d", now), now - 7 * 86400 * s);
  EXPECT_EQ(*ParseTimeArg("2w", now), now - 14 * 86400 * s);
}

TEST(VerdictTest, OneListWithUniqueNamesThatRoundTrip) {
  std::set<std::string_view> names;
  for (const auto& v : AllVerdicts()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name;
    EXPECT_EQ(VerdictName(v.verdict), v.name);
    EXPECT_EQ(ParseVerdict(v.name), v.verdict);
    EXPECT_FALSE(v.meaning.empty());
  }
  // design.md's list plus cpu-limit and delivery-failed.
  for (const char* n : {"ok", "nonzero-exit", "timeout", "memory-limit", "pids-limit",
                        "output-limit", "validator-rejected", "refused", "setup-error",
                        "interrupted", "cpu-limit", "delivery-failed"}) {
    EXPECT_TRUE(ParseVerdict(n).has_value()) << n;
  }
  EXPECT_EQ(names.size(), 12u);
  EXPECT_FALSE(ParseVerdict("OK").has_value());
}

}  // namespace
}  // namespace safex::audit
