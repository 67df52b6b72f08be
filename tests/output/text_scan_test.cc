#include "supervisor/output/text_scan.h"

#include <gtest/gtest.h>

#include <string>

namespace safex::output {
namespace {

using plan::ControlChars;

ScanResult Scan(std::string_view text, bool utf8, ControlChars control, uint64_t max_lines = 0,
                bool truncated = false, CarriageReturn cr = CarriageReturn::kCrlfOnly) {
  ScanOptions o;
  o.utf8 = utf8;
  o.control = control;
  o.max_lines = max_lines;
  o.input_truncated = truncated;
  o.carriage_return = cr;
  return ScanText(text, o);
}

std::string Stripped(std::string_view text, bool utf8 = true) {
  ScanResult r = Scan(text, utf8, ControlChars::kStrip);
  EXPECT_FALSE(r.rejected()) << text;
  return std::string(r.Output(text));
}

TEST(TextScanTest, ValidUtf8Passes) {
  for (const char* s : {"", "plain ascii\n", "h\xc3\xa9llo", "\xe2\x82\xac\xf0\x9f\x98\x80",
                        "\xef\xbf\xbd", "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf", "\xee\x80\x80"}) {
    ScanResult r = Scan(s, true, ControlChars::kAllow);
    EXPECT_FALSE(r.utf8_error) << s;
  }
}

TEST(TextScanTest, InvalidUtf8IsRejectedAtItsOffset) {
  struct Case {
    std::string text;
    uint64_t offset;
  } cases[] = {
      {"ab\xc0\x80", 2},              // overlong NUL
      {"\xc1\xbf", 0},                // overlong
      {"x\xe0\x80\xaf", 1},           // overlong '/'
      {"\xf0\x80\x80\xaf", 0},        // overlong 4-byte
      {"ok\xed\xa0\x80", 2},          // surrogate U+D800
      {"\xed\xbf\xbf", 0},            // surrogate U+DFFF
      {"\xf4\x90\x80\x80", 0},        // above U+10FFFF
      {"\xf5\x80\x80\x80", 0},        // never valid lead
      {"a\x80", 1},                   // lone continuation
      {"\xc3(", 0},                   // bad continuation
      {"line1\nline2 \xe2\x82", 12},  // cut short, but the input was not truncated
  };
  for (const Case& c : cases) {
    ScanResult r = Scan(c.text, true, ControlChars::kAllow);
    ASSERT_TRUE(r.utf8_error) << c.text;
    EXPECT_EQ(r.utf8_error->offset, c.offset) << c.text;
  }
  ScanResult r = Scan("line1\nline2 \xff", true, ControlChars::kAllow);
  EXPECT_EQ(r.utf8_error->line, 2u);
  EXPECT_NE(r.utf8_error->what.find("0xff"), std::string::npos);
}

TEST(TextScanTest, SequenceCutByTruncationIsDroppedNotRejected) {
  const std::string text = "price: \xe2\x82";  // the euro sign cut after 2 of its 3 bytes
  ScanResult r = Scan(text, true, ControlChars::kAllow, 0, /*truncated=*/true);
  EXPECT_FALSE(r.utf8_error);
  EXPECT_EQ(r.partial_tail_dropped, 2u);
  EXPECT_EQ(r.Output(text), "price: ");
  // An invalid byte at the end is still invalid, truncated or not.
  ScanResult bad = Scan("price: \xe2(", true, ControlChars::kAllow, 0, true);
  EXPECT_TRUE(bad.utf8_error);
}

TEST(TextScanTest, StripsAnsiSequences) {
  EXPECT_EQ(Stripped("\x1b[31mred\x1b[0m plain"), "red plain");
  EXPECT_EQ(Stripped("\x1b[38;5;196mx\x1b[?25l"), "x");
  EXPECT_EQ(Stripped("a\x1b]0;window title\x07"
                     "b"),
            "ab");                                                                 // OSC + BEL
  EXPECT_EQ(Stripped("a\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\b"), "alinkb");  // OSC 8
  EXPECT_EQ(Stripped("a\x1bPq#0;2;0;0;0\x1b\\b"), "ab");                           // DCS (sixel)
  EXPECT_EQ(Stripped("a\x1b_apc\x1b\\b\x1b^pm\x07"
                     "c"),
            "abc");                                                // APC, PM
  EXPECT_EQ(Stripped("keep\x1b]52;c;BASE64 never ends"), "keep");  // unterminated OSC
  EXPECT_EQ(Stripped("a\x1b"
                     "cb\x1b(Bc\x1b"
                     "7d"),
            "abcd");                      // other escapes
  EXPECT_EQ(Stripped("end\x1b"), "end");  // lone ESC
  EXPECT_EQ(Stripped("\xc2\x9b"
                     "31mC1\xc2\x9d"
                     "0;t\xc2\x9c"
                     "x"),
            "C1x");  // C1 CSI, OSC, ST
  EXPECT_EQ(Stripped("bell\x07 bs\x08 nul", true), "bell bs nul");
  EXPECT_EQ(Stripped("tab\tand\nnewline"), "tab\tand\nnewline");
  EXPECT_EQ(Stripped("abc\xe2\x80\xae"
                     "fed\xe2\x81\xa6"),
            "abcfed");  // bidi controls
  EXPECT_EQ(Stripped("del\x7f"), "del");
}

TEST(TextScanTest, StripReportsWhatAndWhere) {
  ScanResult r = Scan("one\ntwo \x1b[1mbold", true, ControlChars::kStrip);
  EXPECT_EQ(r.controls_removed, 1u);
  EXPECT_EQ(r.bytes_removed, 4u);
  ASSERT_TRUE(r.first_removed);
  EXPECT_EQ(r.first_removed->offset, 8u);
  EXPECT_EQ(r.first_removed->line, 2u);
  EXPECT_NE(r.first_removed->what.find("CSI"), std::string::npos);
}

TEST(TextScanTest, RawC1BytesAreControlsWhenUtf8IsNotChecked) {
  EXPECT_EQ(Stripped("a\x9b"
                     "31mb",
                     /*utf8=*/false),
            "ab");
  EXPECT_EQ(Stripped("latin1 \xe9t\xe9", /*utf8=*/false), "latin1 \xe9t\xe9");
}

TEST(TextScanTest, RejectModeStopsAtTheFirstControl) {
  ScanResult r = Scan("fine\nstill fine\x1b[2J", true, ControlChars::kReject);
  ASSERT_TRUE(r.control_error);
  EXPECT_EQ(r.control_error->offset, 15u);
  EXPECT_EQ(r.control_error->line, 2u);
  EXPECT_FALSE(Scan("fine\r\n", true, ControlChars::kReject).control_error);
  EXPECT_TRUE(Scan("over\rwrite", true, ControlChars::kReject).control_error);
  EXPECT_TRUE(Scan("\xc2\x85", true, ControlChars::kReject).control_error);  // NEL
}

TEST(TextScanTest, CarriageReturnModes) {
  auto out = [](CarriageReturn cr) {
    const std::string text = "a\r\nb\rc";
    ScanResult r = Scan(text, true, ControlChars::kStrip, 0, false, cr);
    return std::string(r.Output(text));
  };
  EXPECT_EQ(out(CarriageReturn::kCrlfOnly), "a\r\nbc");
  EXPECT_EQ(out(CarriageReturn::kControl), "a\nbc");
  EXPECT_EQ(out(CarriageReturn::kAllow), "a\r\nb\rc");
}

TEST(TextScanTest, LinesAndLineCap) {
  EXPECT_EQ(Scan("", false, ControlChars::kAllow).lines, 0u);
  EXPECT_EQ(Scan("a", false, ControlChars::kAllow).lines, 1u);
  EXPECT_EQ(Scan("a\n", false, ControlChars::kAllow).lines, 1u);
  EXPECT_EQ(Scan("a\nb", true, ControlChars::kStrip).lines, 2u);
  ScanResult exact = Scan("1\n2\n3\n", false, ControlChars::kAllow, 3);
  EXPECT_FALSE(exact.lines_exceeded);
  ScanResult exact_no_nl = Scan("1\n2\n3", true, ControlChars::kAllow, 3);
  EXPECT_FALSE(exact_no_nl.lines_exceeded);
  for (bool utf8 : {false, true}) {
    ScanResult over = Scan("1\n2\n3\n4", utf8, ControlChars::kAllow, 3);
    EXPECT_TRUE(over.lines_exceeded);
    EXPECT_EQ(over.line_cut, 6u);
  }
  // The cut is in output coordinates: after stripping.
  const std::string text = "\x1b[1m1\n2\n\x1b[0m3\n4\n";
  ScanResult s = Scan(text, true, ControlChars::kStrip, 2);
  EXPECT_TRUE(s.lines_exceeded);
  EXPECT_EQ(s.Output(text).substr(0, s.line_cut), "1\n2\n");
}

}  // namespace
}  // namespace safex::output
