// RenderDiagnostic: header, source line, caret placement (tabs kept), help, and escaping of
// hostile text.
#include <gtest/gtest.h>

#include <string>

#include "dsl/diagnostics.h"
#include "dsl/parser.h"

namespace safex::dsl {
namespace {

std::string RenderFirst(std::string_view text) {
  const ParseResult r = Parse("t.policy", text);
  EXPECT_FALSE(r.diagnostics.empty());
  if (r.diagnostics.empty()) return "";
  return RenderDiagnostic(r.diagnostics[0], text);
}

Diagnostic Make(uint32_t line, uint32_t col, uint32_t end_line, uint32_t end_col) {
  Diagnostic d;
  d.code = "E003";
  d.message = "m";
  d.path = "p";
  d.span.begin = {line, col, 0};
  d.span.end = {end_line, end_col, 0};
  return d;
}

TEST(RenderTest, HeaderSourceCaretHelp) {
  EXPECT_EQ(RenderFirst("limits {\n  memory = 512MB\n}\n"),
            "t.policy:2:15: error[E008]: unknown unit `MB`\n"
            "  memory = 512MB\n"
            "              ^^\n"
            "help: did you mean `MiB`?\n");
}

TEST(RenderTest, NoHelpLineWithoutHelp) {
  EXPECT_EQ(RenderFirst("a = 99999999999999999999\n"),
            "t.policy:1:5: error[E007]: number is too large (the largest is "
            "18446744073709551615)\n"
            "a = 99999999999999999999\n"
            "    ^^^^^^^^^^^^^^^^^^^^\n");
}

TEST(RenderTest, TabsAreKeptInTheCaretIndentation) {
  EXPECT_EQ(RenderFirst("x {\n\t\tmemory =\t512MB\n}\n"),
            "t.policy:2:15: error[E008]: unknown unit `MB`\n"
            "\t\tmemory =\t512MB\n"
            "\t\t        \t   ^^\n"
            "help: did you mean `MiB`?\n");
}

TEST(RenderTest, CaretAfterTheEndOfTheLine) {
  EXPECT_EQ(RenderFirst("a =\n"),
            "t.policy:1:4: error[E018]: expected a value after `=`, found the end of the line\n"
            "a =\n"
            "   ^\n");
  // At the very end of a file without a final newline.
  EXPECT_EQ(RenderFirst("a ="),
            "t.policy:1:4: error[E018]: expected a value after `=`, found the end of the file\n"
            "a =\n"
            "   ^\n");
}

TEST(RenderTest, CrLfIsNotShown) {
  EXPECT_EQ(RenderFirst("a = 1MB\r\n"),
            "t.policy:1:6: error[E008]: unknown unit `MB`\n"
            "a = 1MB\n"
            "     ^^\n"
            "help: did you mean `MiB`?\n");
}

TEST(RenderTest, ControlCharactersInTheSourceAreEscaped) {
  const std::string out = RenderFirst("a = \"\x1b[2J\x1b]0;pwned\x07\"\n");
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_EQ(out.find('\x07'), std::string::npos) << out;
  EXPECT_EQ(out,
            "t.policy:1:6: error[E001]: control character U+001B in the file\n"
            "a = \"\\x1b[2J\\x1b]0;pwned\\x07\"\n"
            "     ^^^^\n"
            "help: inside a string, write it as an escape such as `\\u{1b}`\n");
}

TEST(RenderTest, InvalidUtf8AndBidiAreEscaped) {
  EXPECT_EQ(RenderFirst("s = \"\xff\"\n"),
            "t.policy:1:6: error[E001]: invalid UTF-8 (byte 0xff)\n"
            "s = \"\\xff\"\n"
            "     ^^^^\n"
            "help: policy files are UTF-8 text\n");
  const std::string bidi = RenderFirst(
      "s = \"a\xe2\x80\xae"
      "b\"\n");
  EXPECT_EQ(bidi.find("\xe2\x80\xae"), std::string::npos);
  EXPECT_NE(bidi.find("s = \"a\\u{202e}b\"\n      ^^^^^^^^\n"), std::string::npos) << bidi;
  // C1 CSI (0x9b) would start an escape sequence on some terminals.
  const std::string csi = RenderFirst(
      "s = \"\xc2\x9b"
      "31m\"\n");
  EXPECT_EQ(csi.find("\xc2\x9b"), std::string::npos);
  EXPECT_NE(csi.find("\\u{9b}31m"), std::string::npos) << csi;
}

TEST(RenderTest, CaretCountsEscapedCharactersBeforeIt) {
  Diagnostic d = Make(1, 3, 1, 4);  // the `x` after a raw ESC byte
  EXPECT_EQ(RenderDiagnostic(d, "\x1b x"),
            "p:1:3: error[E003]: m\n"
            "\\x1b x\n"
            "     ^\n");
}

TEST(RenderTest, MessageHelpAndPathAreEscaped) {
  Diagnostic d = Make(1, 1, 1, 2);
  d.path = "evil\x1b[31m.policy";
  d.message = "unknown mount type \"\x1b]0;x\x07\"\nsecond line";
  d.help = "did you mean \x1b[0m?";
  const std::string out = RenderDiagnostic(d, "a\n");
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_EQ(out.find('\x07'), std::string::npos) << out;
  EXPECT_EQ(out,
            "evil\\x1b[31m.policy:1:1: error[E003]: unknown mount type "
            "\"\\x1b]0;x\\x07\"\\nsecond line\n"
            "a\n"
            "^\n"
            "help: did you mean \\x1b[0m?\n");
}

TEST(RenderTest, MultiLineSpanIsUnderlinedToTheEndOfItsFirstLine) {
  Diagnostic d = Make(2, 3, 4, 2);
  EXPECT_EQ(RenderDiagnostic(d, "x {\n  a = [1,\n 2]\n}\n"),
            "p:2:3: error[E003]: m\n"
            "  a = [1,\n"
            "  ^^^^^^^\n");
}

TEST(RenderTest, WithoutSourceOnlyTheHeaderAndHelp) {
  Diagnostic d = Make(3, 4, 3, 5);
  d.help = "h";
  EXPECT_EQ(RenderDiagnostic(d, ""), "p:3:4: error[E003]: m\nhelp: h\n");
  // A line past the end of the source is not shown either.
  EXPECT_EQ(RenderDiagnostic(d, "a\n"), "p:3:4: error[E003]: m\nhelp: h\n");
}

TEST(RenderTest, SeverityAndNoPath) {
  Diagnostic d = Make(1, 1, 1, 1);
  d.path = "";
  d.severity = Severity::kWarning;
  d.code = "E090";
  EXPECT_EQ(RenderDiagnostic(d, ""), "warning[E090]: m\n");
  d.severity = Severity::kNote;
  d.code = "";
  EXPECT_EQ(RenderDiagnostic(d, ""), "note: m\n");
}

TEST(RenderTest, LongLinesAreShownAsAWindow) {
  std::string text = "a = [" + std::string(5000, ' ') + "1MB]\n";
  const std::string out = RenderFirst(text);
  const size_t first_nl = out.find('\n');
  const size_t second_nl = out.find('\n', first_nl + 1);
  const size_t third_nl = out.find('\n', second_nl + 1);
  const std::string src = out.substr(first_nl + 1, second_nl - first_nl - 1);
  const std::string caret = out.substr(second_nl + 1, third_nl - second_nl - 1);
  EXPECT_LE(src.size(), 130u) << src;
  EXPECT_EQ(src.substr(0, 3), "...");
  EXPECT_NE(src.find("1MB]"), std::string::npos);
  // The caret is under `MB`.
  EXPECT_EQ(caret.find('^'), src.find("MB]"));
  EXPECT_EQ(caret.substr(caret.find('^')), "^^");
}

TEST(RenderTest, HugeLineDoesNotFloodTheTerminal) {
  const std::string text = "a = \"" + std::string(1 << 20, 'x') + "\"";
  Diagnostic d = Make(1, 500000, 1, 500001);
  const std::string out = RenderDiagnostic(d, text);
  EXPECT_LT(out.size(), 400u);
}

}  // namespace
}  // namespace safex::dsl
