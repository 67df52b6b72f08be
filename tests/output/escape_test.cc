#include "supervisor/output/escape.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "supervisor/output/utf8.h"

namespace safex::output {
namespace {

bool IsSafe(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    if (*p < 0x20 || *p == 0x7F) return false;
    const Utf8Char c = DecodeUtf8(p, end);
    if (c.status != Utf8Status::kOk) return false;
    if (c.code_point >= 0x80 && c.code_point <= 0x9F) return false;
    if (IsInvisibleFormat(c.code_point)) return false;
    p += c.length;
  }
  return true;
}

TEST(EscapeTest, PrintableTextPassesUnchanged) {
  EXPECT_EQ(EscapeForLog("hello, world: 42 {}[]"), "hello, world: 42 {}[]");
  EXPECT_EQ(EscapeForLog("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"),
            "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80");
}

TEST(EscapeTest, ControlsAndBackslash) {
  EXPECT_EQ(EscapeForLog("a\\b"), "a\\\\b");
  EXPECT_EQ(EscapeForLog("l1\nl2\tx\r"), "l1\\nl2\\tx\\r");
  EXPECT_EQ(EscapeForLog(std::string("\x1b[31mred\x7f\0z", 11)), "\\x1b[31mred\\x7f\\x00z");
  EXPECT_EQ(EscapeForLog("a\nb", {.keep_newlines = true}), "a\nb");
  EXPECT_EQ(EscapeForLog("say \"hi\""), "say \"hi\"");
  EXPECT_EQ(EscapeForLog("say \"hi\"", {.escape_double_quote = true}), "say \\\"hi\\\"");
}

TEST(EscapeTest, C1AndInvisibleCharactersAreEscaped) {
  EXPECT_EQ(EscapeForLog("\xc2\x9b"
                         "31m"),
            "\\u{9b}31m");  // C1 CSI
  EXPECT_EQ(EscapeForLog("abc\xe2\x80\xae"
                         "cba"),
            "abc\\u{202e}cba");                              // RTL override
  EXPECT_EQ(EscapeForLog("x\xe2\x80\x8by"), "x\\u{200b}y");  // zero-width space
  EXPECT_EQ(EscapeForLog("\xef\xbb\xbfz"), "\\u{feff}z");    // BOM
  EXPECT_EQ(EscapeForLog("a\xe2\x80\xa8"
                         "b"),
            "a\\u{2028}b");  // line separator
}

TEST(EscapeTest, InvalidUtf8BecomesHexBytes) {
  EXPECT_EQ(EscapeForLog("\xff"), "\\xff");
  EXPECT_EQ(EscapeForLog("\xc0\x80"), "\\xc0\\x80");           // overlong NUL
  EXPECT_EQ(EscapeForLog("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // surrogate
  EXPECT_EQ(EscapeForLog("ok\xe2\x82"), "ok\\xe2\\x82");       // truncated at the end
  EXPECT_EQ(EscapeForLog("\xe2\x82z"), "\\xe2\\x82z");
}

TEST(EscapeTest, MaxOutputCutsBetweenEscapesAndSaysHowMuchIsLeft) {
  const std::string in(100, 'a');
  const std::string out = EscapeForLog(in, {.max_output = 10});
  EXPECT_EQ(out, "aaaaaaaaaa...[90 more bytes]");
  // Never half an escape: "\x1b" is 4 bytes and does not fit after 8 'a's in 10.
  EXPECT_EQ(EscapeForLog("aaaaaaaa\x1bzz", {.max_output = 10}), "aaaaaaaa...[3 more bytes]");
}

TEST(EscapeTest, RandomBytesAlwaysComeOutSafe) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 2000; ++round) {
    std::string in(rng() % 64, '\0');
    for (char& c : in) c = static_cast<char>(rng() & 0xFF);
    const std::string out = EscapeForLog(in);
    ASSERT_TRUE(IsSafe(out)) << out;
  }
}

}  // namespace
}  // namespace safex::output
