// Syntax errors: codes, positions, messages and help, and statement-level recovery.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsl/parser.h"
#include "tests/dsl/dsl_test_util.h"

namespace safex::dsl {
namespace {

using testing::Codes;
using V = std::vector<std::string>;

// The only diagnostic of a parse that must have exactly one.
Diagnostic Only(std::string_view text) {
  ParseResult r = Parse("t.policy", text);
  EXPECT_EQ(r.diagnostics.size(), 1u) << ::testing::PrintToString(Codes(r));
  if (r.diagnostics.empty()) return Diagnostic{};
  EXPECT_FALSE(r.ok());
  return r.diagnostics[0];
}

TEST(ErrorsTest, UnknownUnitSuggestsTheBinaryUnit) {
  Diagnostic d = Only("memory = 512MB\n");
  EXPECT_EQ(d.code, "E008");
  EXPECT_EQ(d.message, "unknown unit `MB`");
  EXPECT_EQ(d.help, "did you mean `MiB`?");
  EXPECT_EQ(d.path, "t.policy");
  // The span is the unit, not the number.
  EXPECT_EQ(d.span.begin.line, 1u);
  EXPECT_EQ(d.span.begin.column, 13u);
  EXPECT_EQ(d.span.end.column, 15u);
}

TEST(ErrorsTest, UnitSuggestions) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"MB", "MiB"},  {"mb", "MiB"},  {"M", "MiB"},   {"Mi", "MiB"},  {"KB", "KiB"},
      {"kb", "KiB"},  {"k", "KiB"},   {"GB", "GiB"},  {"Gb", "GiB"},  {"TB", "TiB"},
      {"b", "B"},     {"bytes", "B"}, {"sec", "s"},   {"secs", "s"},  {"seconds", "s"},
      {"min", "m"},   {"mins", "m"},  {"hr", "h"},    {"hrs", "h"},   {"hours", "h"},
      {"msec", "ms"}, {"MS", "ms"},   {"usec", "us"}, {"nsec", "ns"}, {"H", "h"},
      {"Mib", "MiB"}, {"gib", "GiB"},
  };
  for (const auto& [written, meant] : cases) {
    Diagnostic d = Only("x = 5" + written + "\n");
    EXPECT_EQ(d.code, "E008") << written;
    EXPECT_EQ(d.message, "unknown unit `" + written + "`");
    EXPECT_EQ(d.help, "did you mean `" + meant + "`?") << written;
  }
  Diagnostic days = Only("x = 2d\n");
  EXPECT_EQ(days.code, "E008");
  EXPECT_NE(days.help.find("24h"), std::string::npos);
  Diagnostic junk = Only("x = 5zorglub\n");
  EXPECT_EQ(junk.code, "E008");
  EXPECT_NE(junk.help.find("KiB"), std::string::npos) << junk.help;  // the list of units
}

TEST(ErrorsTest, ExpectedAssignmentValueOrBlock) {
  Diagnostic d = Only("memory: 5\n");
  EXPECT_EQ(d.code, "E003");
  EXPECT_EQ(d.message, "expected `=`, a value or `{` after `memory`, found `:`");
  EXPECT_EQ(d.help, "assign with `=`, e.g. `memory = 512MiB`");
  EXPECT_EQ(d.span.begin.column, 7u);
  Diagnostic hostport = Only("egress pypi.org:443\n");
  EXPECT_NE(hostport.help.find("\"pypi.org:443\""), std::string::npos);
}

TEST(ErrorsTest, UnterminatedStringPointsAtItsQuote) {
  Diagnostic d = Only("a = 1\nname = \"abc\nb = 2\n");
  EXPECT_EQ(d.code, "E004");
  EXPECT_EQ(d.message, "unterminated string (opened here)");
  EXPECT_EQ(d.span.begin.line, 2u);
  EXPECT_EQ(d.span.begin.column, 8u);
  EXPECT_EQ(d.span.end.column, 9u);
  EXPECT_EQ(Codes("s = \"abc").at(0), "E004 1:5");      // at the end of the file
  EXPECT_EQ(Codes("s = \"abc\\\n").at(0), "E004 1:5");  // a backslash at the end of the line
}

TEST(ErrorsTest, BadEscapes) {
  EXPECT_EQ(Codes(R"(s = "a\qb")"), V{"E005 1:7"});
  EXPECT_EQ(Codes(R"(s = "\u{110000}")"), V{"E005 1:6"});
  EXPECT_EQ(Codes(R"(s = "\u{D800}")"), V{"E005 1:6"});
  EXPECT_EQ(Codes(R"(s = "\u{}")"), V{"E005 1:6"});
  EXPECT_EQ(Codes(R"(s = "\u{1234567}")"), V{"E005 1:6"});
  EXPECT_EQ(Codes(R"(s = "\u12")"), V{"E005 1:6"});
  EXPECT_EQ(Codes(R"(s = "\x41")"), V{"E005 1:6"});
  Diagnostic d = Only(R"(s = "\q")");
  EXPECT_EQ(d.message, "unknown escape `\\q` in a string");
  EXPECT_EQ(d.span.end.column - d.span.begin.column, 2u);
}

TEST(ErrorsTest, RawTabInStringOrRegex) {
  EXPECT_EQ(Codes("s = \"a\tb\""), V{"E006 1:7"});
  EXPECT_EQ(Codes("r /a\tb/"), V{"E006 1:5"});
  EXPECT_EQ(Codes("r /a\\\tb/"), V{"E006 1:6"});
}

TEST(ErrorsTest, IntegerOverflowSpansTheNumber) {
  EXPECT_TRUE(Codes("a = 18446744073709551615").empty());
  Diagnostic d = Only("a = 18446744073709551616\n");
  EXPECT_EQ(d.code, "E007");
  EXPECT_EQ(d.span.begin.column, 5u);
  EXPECT_EQ(d.span.end.column, 25u);
  const std::string thousand(1000, '9');
  EXPECT_EQ(Codes("a = " + thousand), V{"E007 1:5"});
  EXPECT_EQ(Codes("a = " + thousand + "MiB"), V{"E007 1:5"});
}

TEST(ErrorsTest, QuantityOverflow) {
  Diagnostic d = Only("memory = 99999999999GiB\n");
  EXPECT_EQ(d.code, "E009");
  EXPECT_EQ(d.help, "the largest amount in GiB is `17179869183GiB`");
  EXPECT_TRUE(Codes("memory = 17179869183GiB").empty());
  EXPECT_EQ(Codes("t = 5124096h"), V{"E009 1:5"});
  EXPECT_TRUE(Codes("t = 5124095h").empty());
  EXPECT_TRUE(Codes("t = 18446744073709551615ns").empty());
}

TEST(ErrorsTest, MalformedNumbers) {
  EXPECT_EQ(Codes("a = 1__0"), V{"E010 1:5"});
  EXPECT_EQ(Codes("a = 10_"), V{"E010 1:5"});
  EXPECT_EQ(Codes("a = 10_MiB"), V{"E010 1:5"});
  EXPECT_EQ(Codes("a = -5"), V{"E010 1:5"});
  EXPECT_EQ(Codes("a = [1, -5]"), V{"E010 1:9"});
  Diagnostic frac = Only("memory = 1.5GiB\n");
  EXPECT_EQ(frac.code, "E010");
  EXPECT_EQ(frac.help, "numbers are whole: write `1536MiB`");
  EXPECT_EQ(Only("t = 0.5s").help, "numbers are whole: write `500ms`");
  EXPECT_EQ(Only("t = 2.5h").help, "numbers are whole: write `150m`");
  EXPECT_EQ(Only("t = 1.0000000001s").help,
            "numbers are whole: use a smaller unit instead of a fraction");
  Diagnostic spaced = Only("memory = 512 MiB\n");
  EXPECT_EQ(spaced.code, "E010");
  EXPECT_EQ(spaced.help, "write `512MiB`");
  EXPECT_EQ(spaced.span.begin.column, 14u);
  EXPECT_EQ(Only("t = 30 sec").help, "write `30s`");
  // A following statement is not a detached unit.
  EXPECT_TRUE(Codes("limit = 5  b = 3").empty());
  EXPECT_TRUE(Codes("limit = 5  s { }").empty());
}

TEST(ErrorsTest, Regexes) {
  Diagnostic d = Only("mount tmpfs at /tmp\n");
  EXPECT_EQ(d.code, "E011");
  EXPECT_EQ(d.span.begin.column, 16u);
  EXPECT_NE(d.help.find("\"/tmp\""), std::string::npos);
  EXPECT_EQ(Codes("r /abc\\/"), V{"E011 1:3"});
  EXPECT_EQ(Codes("r /abc\\"), V{"E011 1:3"});
  EXPECT_EQ(Codes("r /abc"), V{"E011 1:3"});  // at the end of the file
  EXPECT_EQ(Codes("r = //"), V{"E012 1:5"});
  EXPECT_EQ(Codes("// a C comment"), V{"E003 1:1"});
}

TEST(ErrorsTest, UnclosedDelimitersPointAtTheOpener) {
  EXPECT_EQ(Codes("a {\n  b = 1\n"), V{"E013 1:3"});
  EXPECT_EQ(Codes("a = [1,\n 2\n"), V{"E013 1:5"});
  EXPECT_EQ(Codes("a = [1, 2\n"), V{"E013 1:5"});
  EXPECT_EQ(Codes("b { a = [1, 2 }\n"), V{"E013 1:9"});
  EXPECT_EQ(Codes("@x(1, 2\na = 1\n"), V{"E013 1:3"});
  // Nested unclosed blocks: one error, at the innermost, naming the others.
  ParseResult r = Parse("t", "a {\n  b {\n    c {\n      d = 1\n");
  ASSERT_EQ(Codes(r), V{"E013 3:7"});
  EXPECT_NE(r.diagnostics[0].help.find("1:3, 2:5"), std::string::npos) << r.diagnostics[0].help;
  // The tree is kept.
  ASSERT_EQ(r.file.statements.size(), 1u);
  EXPECT_EQ(r.file.statements[0].block[0].block[0].block.size(), 1u);
}

TEST(ErrorsTest, StrayClosers) {
  EXPECT_EQ(Codes("}\na = 1\n"), V{"E014 1:1"});
  EXPECT_EQ(Codes("a = [1]]\n"), V{"E014 1:8"});
  EXPECT_EQ(Codes("a = 1 )\n"), V{"E014 1:7"});
  EXPECT_EQ(Codes("]\n"), V{"E014 1:1"});
  // A run of stray braces on one line is one error.
  EXPECT_EQ(Codes("}}}}}\n"), V{"E014 1:1"});
}

TEST(ErrorsTest, StatementMustStartWithAName) {
  EXPECT_EQ(Codes("= 5"), V{"E003 1:1"});
  EXPECT_EQ(Codes("\"a\" = 5"), V{"E003 1:1"});
  EXPECT_EQ(Codes("5 = 5"), V{"E003 1:1"});
  EXPECT_EQ(Codes("[a] = 5"), V{"E003 1:1"});
  EXPECT_EQ(Codes("$x = 5"), V{"E003 1:1"});
  Diagnostic d = Only("policy \"p\"\n{\n  a = 1\n}\n");
  EXPECT_EQ(d.code, "E003");
  EXPECT_EQ(d.span.begin.line, 2u);
  EXPECT_NE(d.help.find("`limits {`"), std::string::npos);
}

TEST(ErrorsTest, ExpectedValue) {
  EXPECT_EQ(Codes("a =\n"), V{"E018 1:4"});
  EXPECT_EQ(Codes("a = # nothing\n"), V{"E018 1:5"});
  EXPECT_EQ(Codes("a = ;"), V{"E018 1:5"});
  EXPECT_EQ(Codes("a = = 1"), V{"E018 1:5"});
  EXPECT_EQ(Codes("a = {"), V{"E018 1:5"});
  EXPECT_EQ(Codes("x { a = }"), V{"E018 1:9"});
  EXPECT_EQ(Codes("a = [1, ,]"), V{"E018 1:9"});
  EXPECT_EQ(Codes("a = [,]"), V{"E018 1:6"});
  EXPECT_EQ(Codes("@x(,) a"), V{"E018 1:4"});
}

TEST(ErrorsTest, ListSeparators) {
  ParseResult r = Parse("t", "a = [1 2]\n");
  EXPECT_EQ(Codes(r), V{"E003 1:8"});
  EXPECT_EQ(r.diagnostics[0].help, "separate list items with `,`");
  r = Parse("t", "deny [ptrace, mount\n  other = 1\n");
  EXPECT_EQ(Codes(r), V{"E003 2:3"});
  EXPECT_NE(r.diagnostics[0].help.find("opened at 1:6"), std::string::npos);
}

TEST(ErrorsTest, Annotations) {
  EXPECT_EQ(Codes("@override(\"x\")\n"), V{"E019 1:1"});
  EXPECT_EQ(Codes("a {\n  @override(\"x\")\n}\n"), V{"E019 2:3"});
  EXPECT_EQ(Codes("@ a"), V{"E003 1:2"});
  EXPECT_EQ(Codes("@1 a"), V{"E003 1:2"});
  EXPECT_EQ(Codes("@a(1 2) b"), V{"E003 1:6"});
  // The next line is not part of the annotation.
  EXPECT_EQ(Codes("@a(\n1) b"), (V{"E013 1:3", "E003 2:1"}));
}

TEST(ErrorsTest, AfterTheStatement) {
  ParseResult r = Parse("t", "a = 1 2\n");
  EXPECT_EQ(Codes(r), V{"E003 1:7"});
  EXPECT_EQ(r.diagnostics[0].message, "expected the end of the statement, found `2`");
  EXPECT_EQ(Codes("a { } = 1\n"), V{"E003 1:7"});
  EXPECT_EQ(Codes("a = 1, b\n"), V{"E003 1:6"});
  // The statement before the junk is kept.
  r = Parse("t", "a = 1 2\nb = 3\n");
  ASSERT_EQ(r.file.statements.size(), 2u);
  EXPECT_EQ(r.file.statements[0].assigned.number, 1u);
}

TEST(ErrorsTest, TooDeep) {
  std::string deep = "a = ";
  for (int i = 0; i < 16; ++i) deep += "[";
  for (int i = 0; i < 16; ++i) deep += "]";
  EXPECT_TRUE(Codes(deep).empty());
  EXPECT_EQ(Codes("a = [[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]"), V{"E015 1:21"});
  std::string blocks;
  for (int i = 0; i < 15; ++i) blocks += "a { ";
  blocks += "b = [1]";
  for (int i = 0; i < 15; ++i) blocks += " }";
  EXPECT_TRUE(Codes(blocks).empty()) << blocks;
  std::string too_deep;
  for (int i = 0; i < 16; ++i) too_deep += "a { ";
  too_deep += "b = [1]";
  for (int i = 0; i < 16; ++i) too_deep += " }";
  EXPECT_EQ(Codes(too_deep), V{"E015 1:69"});
  ParseLimits limits;
  limits.max_depth = 2;
  EXPECT_EQ(Codes(Parse("t", "a { b = [[1]] }", limits)), V{"E015 1:10"});
}

TEST(ErrorsTest, TooMany) {
  ParseLimits limits;
  limits.max_items = 3;
  EXPECT_TRUE(Parse("t", "a = [1, 2, 3]", limits).ok());
  EXPECT_EQ(Codes(Parse("t", "a = [1, 2, 3, 4]", limits)), V{"E016 1:15"});
  EXPECT_EQ(Codes(Parse("t", "a b c d", limits)), V{"E016 1:7"});
  EXPECT_EQ(Codes(Parse("t", "@x(1, 2, 3, 4) a", limits)), V{"E016 1:13"});
  EXPECT_EQ(Codes(Parse("t", "a\nb\nc\nd\ne\n", limits)), V{"E016 4:1"});
  EXPECT_EQ(Codes(Parse("t", "x {\n a\n b\n c\n d\n}\n", limits)), V{"E016 5:2"});
}

TEST(ErrorsTest, TokenTooLong) {
  ParseLimits limits;
  limits.max_token_bytes = 8;
  EXPECT_TRUE(Parse("t", "abcdefgh \"12345678\" /12345678/", limits).ok());
  EXPECT_EQ(Codes(Parse("t", "abcdefghi", limits)), V{"E017 1:1"});
  EXPECT_EQ(Codes(Parse("t", "a = \"123456789\"", limits)), V{"E017 1:5"});
  EXPECT_EQ(Codes(Parse("t", "a /123456789/", limits)), V{"E017 1:3"});
  EXPECT_EQ(Codes(Parse("t", "@abcdefghi a", limits)), V{"E017 1:2"});
}

TEST(ErrorsTest, BadBytes) {
  EXPECT_EQ(Codes(std::string("a = 1\nb\0 = 2\n", 13)), V{"E001 2:2"});
  EXPECT_EQ(Codes("a = \"\xff\xfe\"\nb = \"\xc3\"\n"), (V{"E001 1:6", "E001 2:6"}));
  EXPECT_EQ(Codes("a = 1 # \x1b[31m red\n"), V{"E001 1:9"});
  EXPECT_EQ(Codes("a = \"\x7f\""), V{"E001 1:6"});
  EXPECT_EQ(Codes("a = \"\xc2\x9b\""), V{"E001 1:6"});             // C1 CSI
  EXPECT_EQ(Codes("a = \"x\xe2\x80\xae\" # RLO"), V{"E001 1:7"});  // Trojan Source
  EXPECT_EQ(Codes("a = 1\rb = 2"), V{"E001 1:6"});                 // a lone CR
  EXPECT_EQ(Codes("a = 1\n\xEF\xBB\xBF"), V{"E001 2:1"});          // BOM not at the start
  EXPECT_EQ(Codes("a = \"\xed\xa0\x80\""), V{"E001 1:6"});         // encoded surrogate
  EXPECT_EQ(Codes("a = \"\xc0\xaf\""), V{"E001 1:6"});             // overlong
}

TEST(ErrorsTest, TooLarge) {
  ParseLimits limits;
  limits.max_bytes = 10;
  EXPECT_TRUE(Parse("t", "a = 123456", limits).ok());
  ParseResult r = Parse("t", "a = 1234567", limits);
  EXPECT_EQ(Codes(r), V{"E002 1:1"});
  EXPECT_TRUE(r.file.statements.empty());
}

// ---- Recovery: every broken statement is reported once, the rest parses.

TEST(RecoveryTest, ReportsEveryBrokenStatement) {
  const char* text =
      "policy \"p\" {\n"         // 1
      "  limits {\n"             // 2
      "    memory = 512MB\n"     // 3 E008
      "    wall_time = 30s\n"    // 4
      "    cpu_time = 1.5s\n"    // 5 E010
      "  }\n"                    // 6
      "  egress pypi.org:443\n"  // 7 E003
      "  mount tmpfs at /tmp\n"  // 8 E011
      "  env { set A = \"x }\n"  // 9 E004 (the `}` is inside the string)
      "  deny [ptrace, mount\n"  // 10
      "}\n";                     // 11 E013 (unclosed `[`, found `}`)
  ParseResult r = Parse("t", text);
  EXPECT_EQ(Codes(r),
            (V{"E008 3:17", "E010 5:16", "E003 7:18", "E011 8:18", "E004 9:17", "E013 10:8"}));
  // Good statements are in the tree.
  ASSERT_EQ(r.file.statements.size(), 1u);
  const Statement& policy = r.file.statements[0];
  ASSERT_GE(policy.block.size(), 1u);
  ASSERT_EQ(policy.block[0].block.size(), 1u);
  EXPECT_EQ(policy.block[0].block[0].head[0].text, "wall_time");
}

TEST(RecoveryTest, OneErrorPerStatement) {
  // Three problems in one statement: only the first is reported.
  EXPECT_EQ(Codes("a = 5MB 6GB 7TB\nb = 5MB\n"), (V{"E008 1:6", "E008 2:6"}));
  EXPECT_EQ(Codes("a = [1MB, 2MB, 3MB]\n"), V{"E008 1:7"});
}

TEST(RecoveryTest, RecoversInsideNestedBlocks) {
  const char* text =
      "a {\n"
      "  b {\n"
      "    x = 1MB\n"
      "    y = 2\n"
      "    z = 3MB\n"
      "  }\n"
      "  c = 4MB\n"
      "}\n"
      "d = 5MB\n";
  ParseResult r = Parse("t", text);
  EXPECT_EQ(Codes(r), (V{"E008 3:10", "E008 5:10", "E008 7:8", "E008 9:6"}));
  ASSERT_EQ(r.file.statements.size(), 1u);
  ASSERT_EQ(r.file.statements[0].block.size(), 1u);
  EXPECT_EQ(r.file.statements[0].block[0].block.size(), 1u);  // y = 2
}

TEST(RecoveryTest, SemicolonSeparatedStatements) {
  EXPECT_EQ(Codes("a = 1MB; b = 2; c = 3MB\n"), (V{"E008 1:6", "E008 1:22"}));
}

TEST(RecoveryTest, BrokenStatementWithABlockIsSkippedWhole) {
  // The `=` error abandons `mount ...`; its block is skipped, not parsed as loose statements.
  EXPECT_EQ(Codes("mount tmpfs at /tmp {\n  size = 64MiB\n  x = 1MB\n}\nb = 2MB\n"),
            (V{"E011 1:16", "E008 5:6"}));
}

TEST(RecoveryTest, MultiLineListErrorSkipsTheList) {
  EXPECT_EQ(Codes("a = [\n 1,\n 2MB,\n 3MB,\n]\nb = 1MB\n"), (V{"E008 3:3", "E008 6:6"}));
}

TEST(RecoveryTest, UnterminatedStringDoesNotEatTheFile) {
  EXPECT_EQ(Codes("a = \"abc\nb = 1MB\nc = \"x\"\n"), (V{"E004 1:5", "E008 2:6"}));
}

TEST(RecoveryTest, DiagnosticCap) {
  std::string text;
  for (int i = 0; i < 500; ++i) text += "a = 1MB\n";
  ParseResult r = Parse("t", text);
  EXPECT_EQ(r.diagnostics.size(), 100u);
  ParseLimits limits;
  limits.max_diagnostics = 3;
  EXPECT_EQ(Parse("t", text, limits).diagnostics.size(), 3u);
  // The statements being read when the parse stopped are kept in the tree.
  r = Parse("t", "policy \"p\" {\n  limits {\n    a = 1\n    b = 1MB\n    c = 2MB\n    d = 3MB\n",
            limits);
  EXPECT_EQ(r.diagnostics.size(), 3u);
  ASSERT_EQ(r.file.statements.size(), 1u);
  ASSERT_EQ(r.file.statements[0].block.size(), 1u);
  EXPECT_EQ(r.file.statements[0].block[0].block.size(), 1u);
}

TEST(RecoveryTest, StrayCloserInsideBlockClosesIt) {
  // The first `}` closes `a`; the second is stray.
  EXPECT_EQ(Codes("a {\n  b = 1\n}\n}\nc = 1MB\n"), (V{"E014 4:1", "E008 5:6"}));
}

}  // namespace
}  // namespace safex::dsl
