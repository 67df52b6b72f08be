// Format: the canonical layout, comments kept in place, idempotence, and formatted text parsing
// to the same tree, on every example and on the valid corpus.
#include "dsl/formatter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsl/parser.h"
#include "tests/dsl/dsl_test_util.h"
#include "tests/support/test_support.h"

namespace safex::dsl {
namespace {

using testing::ParseOk;

std::string Fmt(std::string_view text) { return Format(ParseOk(text)); }

// Format(Parse(x)) is a fixed point and parses to the same tree as x.
void ExpectStable(std::string_view text) {
  const ParseResult first = Parse("a.policy", text);
  ASSERT_TRUE(first.ok()) << text;
  const std::string once = Format(first.file);
  const ParseResult second = Parse("b.policy", once);
  ASSERT_TRUE(second.ok()) << "formatted text does not parse:\n" << once;
  std::string why;
  EXPECT_TRUE(testing::SameTree(first.file.statements, second.file.statements, &why)) << why << "\n"
                                                                                      << once;
  EXPECT_EQ(first.file.comments.size(), second.file.comments.size()) << once;
  EXPECT_EQ(Format(second.file), once);
}

TEST(FormatterTest, Layout) {
  EXPECT_EQ(Fmt("policy   \"p\"   extends \"q\"{\n"
                "trust=untrusted\n"
                "      limits{wall_time=30s cpu_time=20s;memory=512MiB}\n"
                "mount tmpfs at \"/tmp\" {size=64MiB}\n"
                "}"),
            "policy \"p\" extends \"q\" {\n"
            "  trust = untrusted\n"
            "  limits {\n"
            "    wall_time = 30s\n"
            "    cpu_time = 20s\n"
            "    memory = 512MiB\n"
            "  }\n"
            "  mount tmpfs at \"/tmp\" { size = 64MiB }\n"
            "}\n");
}

TEST(FormatterTest, ValuesAreCanonical) {
  EXPECT_EQ(Fmt("a = 1_000\n"), "a = 1000\n");
  EXPECT_EQ(Fmt("a = 1_024MiB\n"), "a = 1024MiB\n");  // units as written, not normalised
  EXPECT_EQ(Fmt("a = 0060s\n"), "a = 60s\n");
  EXPECT_EQ(Fmt("s = \"tab\\there \\\"q\\\" back\\\\ nl\\n cr\\r\"\n"),
            "s = \"tab\\there \\\"q\\\" back\\\\ nl\\n cr\\r\"\n");
  // Unicode escapes of printable characters become the characters; controls stay escaped.
  EXPECT_EQ(Fmt("s = \"\\u{e9}\\u{1b}\\u{0}\\u{7f}\\u{202e}\\u{feff}\"\n"),
            "s = \"é\\u{1b}\\u{0}\\u{7f}\\u{202e}\\u{feff}\"\n");
  EXPECT_EQ(Fmt("r /a\\/b\\d\\\\/\n"), "r /a\\/b\\d\\\\/\n");
  EXPECT_EQ(Fmt("r /\\\\\\//\n"), "r /\\\\\\//\n");
  EXPECT_EQ(Fmt("a = [ 1 ,2,  [x ,y , ] , ]\n"), "a = [1, 2, [x, y]]\n");
  EXPECT_EQ(Fmt("a = [\n]\n"), "a = []\n");
}

TEST(FormatterTest, Blocks) {
  EXPECT_EQ(Fmt("a {}\nb {\n}\nc { }\n"), "a {}\nb {}\nc {}\n");
  // A one-statement block written on one line stays on one line.
  EXPECT_EQ(Fmt("env { set A = \"1\" }\n"), "env { set A = \"1\" }\n");
  // Written on several lines, it stays expanded.
  EXPECT_EQ(Fmt("env {\n set A = \"1\"\n}\n"), "env {\n  set A = \"1\"\n}\n");
  // Two statements on one line are split.
  EXPECT_EQ(Fmt("x { a = 1  b = 2 }\n"), "x {\n  a = 1\n  b = 2\n}\n");
  // A nested block never stays inline.
  EXPECT_EQ(Fmt("x { y { a = 1 } }\n"), "x {\n  y { a = 1 }\n}\n");
  // Assignment and block together.
  EXPECT_EQ(Fmt("x = 1 { a }\n"), "x = 1 { a }\n");
}

TEST(FormatterTest, InlineBlockThatDoesNotFitIsExpanded) {
  const std::string name(80, 'n');
  EXPECT_EQ(Fmt("mount tmpfs at \"/tmp\" { " + name + " = 64MiB }\n"),
            "mount tmpfs at \"/tmp\" {\n  " + name + " = 64MiB\n}\n");
}

TEST(FormatterTest, LongListsBreakOneItemPerLine) {
  std::string items;
  for (int i = 0; i < 12; ++i)
    items += (i ? ", " : "") + std::string("syscall_") + std::to_string(i);
  const std::string out = Fmt("syscalls {\n  deny [" + items + "]\n}\n");
  std::string expected = "syscalls {\n  deny [\n";
  for (int i = 0; i < 12; ++i) expected += "    syscall_" + std::to_string(i) + ",\n";
  expected += "  ]\n}\n";
  EXPECT_EQ(out, expected);
  ExpectStable(out);
  // A list that fits exactly in 100 columns stays on one line.
  const std::string fits = "a = [\"" + std::string(92, 'x') + "\"]\n";
  ASSERT_EQ(fits.size(), 101u);
  EXPECT_EQ(Fmt(fits), fits);
  const std::string too_long = "a = [\"" + std::string(93, 'x') + "\"]\n";
  EXPECT_EQ(Fmt(too_long), "a = [\n  \"" + std::string(93, 'x') + "\",\n]\n");
}

TEST(FormatterTest, NestedLongLists) {
  std::string inner;
  for (int i = 0; i < 30; ++i) inner += (i ? ", " : "") + std::string("item") + std::to_string(i);
  const std::string out = Fmt("a = [[" + inner + "], [short]]\n");
  EXPECT_EQ(out.substr(0, 12), "a = [\n  [\n  ");
  EXPECT_NE(out.find("  [short],\n"), std::string::npos) << out;
  ExpectStable(out);
}

TEST(FormatterTest, CommentsStayInPlace) {
  const char* in =
      "# file header\n"
      "\n"
      "\n"
      "\n"
      "policy \"p\" {   # trailing the brace\n"
      "        # own line, badly indented\n"
      "  trust = untrusted    # why untrusted\n"
      "\n"
      "  limits {\n"
      "    memory = 1GiB # big\n"
      "    # before the close\n"
      "  }  # after the close\n"
      "  a = 1; b = 2  # on b\n"
      "}\n"
      "# at the end\n";
  const std::string out = Fmt(in);
  EXPECT_EQ(out,
            "# file header\n"
            "\n"
            "policy \"p\" {  # trailing the brace\n"
            "  # own line, badly indented\n"
            "  trust = untrusted  # why untrusted\n"
            "\n"
            "  limits {\n"
            "    memory = 1GiB  # big\n"
            "    # before the close\n"
            "  }  # after the close\n"
            "  a = 1\n"
            "  b = 2  # on b\n"
            "}\n"
            "# at the end\n");
  ExpectStable(in);
}

TEST(FormatterTest, CommentsInsideListsForceOneItemPerLine) {
  const char* in =
      "deny [ptrace,   # debugging\n"
      "  # the mounts\n"
      "  mount, umount2\n"
      "  ,bpf]   # after\n";
  EXPECT_EQ(Fmt(in),
            "deny [\n"
            "  ptrace,  # debugging\n"
            "  # the mounts\n"
            "  mount,\n"
            "  umount2,\n"
            "  bpf,\n"
            "]  # after\n");
  ExpectStable(in);
  EXPECT_EQ(Fmt("a = [ # why\n]\n"), "a = [  # why\n]\n");
  ExpectStable("a = [ # why\n]\n");
  EXPECT_EQ(Fmt("a = [[x, # c\n y]]\n"), "a = [\n  [\n    x,  # c\n    y,\n  ],\n]\n");
  ExpectStable("a = [[x, # c\n y]]\n");
}

TEST(FormatterTest, CommentsInEmptyBlocks) {
  EXPECT_EQ(Fmt("a {\n\n  # nothing yet\n}\n"), "a {\n  # nothing yet\n}\n");
  EXPECT_EQ(Fmt("a { # nothing yet\n}\n"), "a {  # nothing yet\n}\n");
  ExpectStable("a {\n\n  # nothing yet\n}\n");
}

TEST(FormatterTest, BlankLines) {
  EXPECT_EQ(Fmt("\n\n\na = 1\n\n\n\nb = 2\nc = 3\n\n\n"), "a = 1\n\nb = 2\nc = 3\n");
  EXPECT_EQ(Fmt("x {\n\n  a = 1\n\n\n  b = 2\n\n}\n"), "x {\n  a = 1\n\n  b = 2\n}\n");
  EXPECT_EQ(Fmt("a = 1\n\n# c\n\nb = 2\n"), "a = 1\n\n# c\n\nb = 2\n");
}

TEST(FormatterTest, Annotations) {
  EXPECT_EQ(Fmt("@override( \"SEC-1\" ,) @flag() memory=1GiB\n"),
            "@override(\"SEC-1\") @flag memory = 1GiB\n");
  // Annotations written on their own lines keep their own lines.
  const char* own = "x {\n@override(\"SEC-1\")   # why\n\n  # more\n      memory = 1GiB\n}\n";
  EXPECT_EQ(Fmt(own),
            "x {\n"
            "  @override(\"SEC-1\")  # why\n"
            "  # more\n"
            "  memory = 1GiB\n"
            "}\n");
  ExpectStable(own);
}

TEST(FormatterTest, CrLfAndBomBecomeLf) {
  EXPECT_EQ(Fmt("\xEF\xBB\xBF"
                "a = 1 # c\r\nb {\r\n}\r\n"),
            "a = 1  # c\nb {}\n");
}

TEST(FormatterTest, TrailingWhitespaceInCommentsIsTrimmed) {
  EXPECT_EQ(Fmt("# c   \t\na = 1  # d \n"), "# c\na = 1  # d\n");
}

TEST(FormatterTest, EmptyFile) {
  EXPECT_EQ(Fmt(""), "");
  EXPECT_EQ(Fmt("\n\n"), "");
  EXPECT_EQ(Fmt("# only\n"), "# only\n");
}

TEST(FormatterTest, FormatValue) {
  Value v;
  v.kind = ValueKind::kList;
  Value s;
  s.kind = ValueKind::kString;
  s.text = "a\"b";
  Value q;
  q.kind = ValueKind::kQuantity;
  q.number = 64;
  q.unit = "MiB";
  v.items = {s, q};
  EXPECT_EQ(FormatValue(v), "[\"a\\\"b\", 64MiB]");
}

TEST(FormatterTest, StableOnTheExamples) {
  ExpectStable(
      "policy \"python-untrusted\" extends \"base-untrusted\" {\n"
      "  trust     = untrusted\n"
      "  isolation = gvisor                 # gvisor | microvm | native(trusted only)\n"
      "  limits {\n"
      "    wall_time = 30s   cpu_time = 20s   memory = 512MiB\n"
      "    pids = 64         open_files = 256 output = 1MiB   disk = 64MiB\n"
      "  }\n"
      "  rootfs host_readonly [\"/usr\", \"/lib\", \"/lib64\", \"/bin\"]\n"
      "  mount tmpfs at \"/tmp\" { size = 64MiB }\n"
      "  network {\n"
      "    default = deny\n"
      "    egress \"pypi.org:443\"\n"
      "  }\n"
      "  env { set PYTHONDONTWRITEBYTECODE = \"1\" }\n"
      "  syscalls { default = allow  deny [ptrace, mount, bpf, keyctl, userfaultfd, "
      "io_uring_setup] }\n"
      "  validate stdout { max = 64KiB  utf8 = true  reject /AKIA[0-9A-Z]{16}/ }\n"
      "  @override(\"SEC-123: pandas needs it\") memory = 1GiB\n"
      "}\n");
}

TEST(FormatterTest, StableOnTheValidCorpus) {
  std::vector<std::string> files =
      testing::ListFiles(safex::testing::SourceDir() + "/tests/dsl/testdata/valid", ".policy");
  for (const std::string& p :
       testing::ListFiles(safex::testing::SourceDir() + "/policies/examples", ".policy")) {
    files.push_back(p);
  }
  ASSERT_FALSE(files.empty());
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    ExpectStable(testing::ReadFile(path));
  }
}

// Files in tests/dsl/testdata/valid that are already canonical stay byte-for-byte the same.
TEST(FormatterTest, CanonicalFilesAreUnchanged) {
  const std::string path =
      safex::testing::SourceDir() + "/tests/dsl/testdata/valid/canonical.policy";
  const std::string text = testing::ReadFile(path);
  EXPECT_EQ(Fmt(text), text);
}

}  // namespace
}  // namespace safex::dsl
