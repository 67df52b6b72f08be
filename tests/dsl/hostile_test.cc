// Hostile input: nothing crashes, hangs or recurses without bound; every refusal is one clean
// diagnostic. (Speed is measured in bench/dsl, not here; these inputs finish in milliseconds.)
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "dsl/diagnostics.h"
#include "dsl/formatter.h"
#include "dsl/parser.h"
#include "tests/dsl/dsl_test_util.h"

namespace safex::dsl {
namespace {

using testing::Codes;
using V = std::vector<std::string>;

std::string Repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

TEST(HostileTest, HundredThousandNestedBrackets) {
  EXPECT_EQ(Codes("a = " + Repeat("[", 100000)), V{"E015 1:21"});
  EXPECT_EQ(Codes("a = " + Repeat("[", 100000) + Repeat("]", 100000)), V{"E015 1:21"});
}

TEST(HostileTest, HundredThousandNestedBlocks) {
  EXPECT_EQ(Codes(Repeat("a {", 100000)), V{"E015 1:51"});
  EXPECT_EQ(Codes(Repeat("a {", 100000) + Repeat("}", 100000)), V{"E015 1:51"});
  EXPECT_EQ(Codes(Repeat("a {\n", 100000)), V{"E015 17:3"});
}

TEST(HostileTest, HundredThousandBareBraces) {
  EXPECT_EQ(Codes(Repeat("{", 100000)), V{"E003 1:1"});
  EXPECT_EQ(Codes(Repeat("}", 100000)), V{"E014 1:1"});
  EXPECT_EQ(Codes(Repeat("]", 100000)), V{"E014 1:1"});
  EXPECT_EQ(Codes("a = [" + Repeat("}", 100000)), V{"E013 1:5"});
}

TEST(HostileTest, ManyAnnotationsAndParens) {
  EXPECT_EQ(Codes(Repeat("@a(", 100000)), V{"E018 1:4"});
  EXPECT_EQ(Codes(Repeat("@a ", 100000)), V{"E016 1:12289"});
}

TEST(HostileTest, OversizedFileIsRefused) {
  const std::string text = Repeat("a = 1\n", (1 << 20) / 6 + 1);
  ASSERT_GT(text.size(), 1u << 20);
  const ParseResult r = Parse("t", text);
  EXPECT_EQ(Codes(r), V{"E002 1:1"});
  EXPECT_TRUE(r.file.statements.empty());
}

TEST(HostileTest, OneMegabyteStringIsRefused) {
  const std::string text = "a = \"" + std::string(1000000, 'x') + "\"\n";
  EXPECT_EQ(Codes(text), V{"E017 1:5"});
  const std::string unterminated = "a = \"" + std::string(1000000, 'x');
  EXPECT_EQ(Codes(unterminated), V{"E004 1:5"});
  EXPECT_EQ(Codes("a /" + std::string(1000000, 'x') + "/"), V{"E017 1:3"});
  EXPECT_EQ(Codes(std::string(1000000, 'x')), V{"E017 1:1"});
}

TEST(HostileTest, HugeNumbers) {
  EXPECT_EQ(Codes("a = " + std::string(1000, '9')), V{"E007 1:5"});
  EXPECT_EQ(Codes("a = " + std::string(100000, '9') + "GiB"), V{"E017 1:5"});
  EXPECT_EQ(Codes("a = 1" + std::string(100000, '_')), V{"E017 1:5"});
}

TEST(HostileTest, ManyStatementsAreCapped) {
  const ParseResult r = Parse("t", Repeat("a\n", 100000));
  EXPECT_EQ(Codes(r), V{"E016 4097:1"});
  EXPECT_EQ(r.file.statements.size(), 4096u);
  const ParseResult list = Parse("t", "a = [" + Repeat("1,", 100000) + "]");
  EXPECT_EQ(Codes(list), V{"E016 1:8198"});
}

TEST(HostileTest, ManyErrorsAreCapped) {
  EXPECT_EQ(Parse("t", Repeat("a = 1MB\n", 100000)).diagnostics.size(), 100u);
  EXPECT_EQ(Parse("t", Repeat("\xff\n", 100000)).diagnostics.size(), 100u);
  EXPECT_EQ(Parse("t", Repeat("a\n}\n", 10000)).diagnostics.size(), 100u);
}

TEST(HostileTest, LongComment) {
  const std::string text = "# " + std::string(1000000, 'c') + "\na = 1\n";
  const ParseResult r = Parse("t", text);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.file.statements.size(), 1u);
}

TEST(HostileTest, NulAndBinaryGarbage) {
  std::string text(4096, '\0');
  EXPECT_EQ(Codes(text), V{"E001 1:1"});  // one run on one line
  text = "a = 1\n" + std::string(
                         "\x7f"
                         "ELF\x02\x01\x01",
                         7);
  EXPECT_EQ(Codes(text)[0], "E001 2:1");
}

// Random bytes and random token soup: Parse never throws or crashes, diagnostics render, and
// whatever parses formats to text that parses to the same tree.
TEST(HostileTest, RandomInputs) {
  std::mt19937 rng(12345);
  const std::vector<std::string> tokens = {"a",
                                           "b.c",
                                           "x-y",
                                           "=",
                                           "{",
                                           "}",
                                           "[",
                                           "]",
                                           ",",
                                           ";",
                                           "\n",
                                           " ",
                                           "\t",
                                           "#c\n",
                                           "@o",
                                           "(",
                                           ")",
                                           "\"s\"",
                                           "\"\\u{e9}\"",
                                           "\"",
                                           "/r/",
                                           "/",
                                           "5",
                                           "5MiB",
                                           "5MB",
                                           "1.5s",
                                           "1_0",
                                           "-",
                                           "\r\n",
                                           "\\",
                                           "\xc3\xa9",
                                           "\xff",
                                           "99999999999999999999",
                                           ":"};
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 60);
    if (round % 3 == 0) {
      for (int i = 0; i < n * 4; ++i) text.push_back(static_cast<char>(rng() % 256));
    } else {
      for (int i = 0; i < n; ++i) text += tokens[rng() % tokens.size()];
    }
    const ParseResult r = Parse("fuzz", text);
    for (const Diagnostic& d : r.diagnostics) {
      const std::string out = RenderDiagnostic(d, text);
      ASSERT_FALSE(out.empty());
      ASSERT_GE(d.span.begin.line, 1u);
    }
    if (!r.ok()) continue;
    const std::string once = Format(r.file);
    const ParseResult again = Parse("fuzz", once);
    ASSERT_TRUE(again.ok()) << "input:\n" << text << "\nformatted:\n" << once;
    std::string why;
    ASSERT_TRUE(testing::SameTree(r.file.statements, again.file.statements, &why))
        << why << "\ninput:\n"
        << text << "\nformatted:\n"
        << once;
    ASSERT_EQ(Format(again.file), once) << "input:\n" << text;
  }
}

}  // namespace
}  // namespace safex::dsl
