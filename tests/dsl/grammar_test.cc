// Grammar: every construct of the statement tree, and the source spans the parser records.
#include <gtest/gtest.h>

#include <string>

#include "dsl/ast.h"
#include "dsl/formatter.h"
#include "dsl/parser.h"
#include "tests/dsl/dsl_test_util.h"

namespace safex::dsl {
namespace {

using testing::ParseOk;

// The policy sketch of /work/shared/design.md, verbatim.
constexpr char kDesignSketch[] = R"(policy "python-untrusted" extends "base-untrusted" {
  trust     = untrusted
  isolation = gvisor                 # gvisor | microvm | native(trusted only)
  limits {
    wall_time = 30s   cpu_time = 20s   memory = 512MiB
    pids = 64         open_files = 256 output = 1MiB   disk = 64MiB
  }
  rootfs host_readonly ["/usr", "/lib", "/lib64", "/bin"]
  mount tmpfs at "/tmp" { size = 64MiB }
  mount input at "/data/in" { mode = ro }
  mount output at "/data/out" { size = 16MiB }
  network {
    default = deny
    egress "pypi.org:443"
  }
  env { set PYTHONDONTWRITEBYTECODE = "1" }
  syscalls { default = allow  deny [ptrace, mount, bpf, keyctl, userfaultfd, io_uring_setup] }
  validate stdout { max = 64KiB  utf8 = true  reject /AKIA[0-9A-Z]{16}/ }
  validate file "/data/out/result.json" { json = true  max = 1MiB }
}
)";

// The example in the comment at the top of dsl/ast.h.
constexpr char kAstHeaderExample[] = R"(policy "python-untrusted" extends "base-untrusted" {
  limits { memory = 512MiB  wall_time = 30s }
  mount tmpfs at "/tmp" { size = 64MiB }
  egress "pypi.org:443"
  deny [ptrace, mount]
  reject /AKIA[0-9A-Z]{16}/
  @override("SEC-123: pandas needs it") memory = 1GiB
}
)";

const Value& Head(const Statement& s, size_t i) { return s.head.at(i); }

TEST(GrammarTest, DesignSketchParses) {
  File f = ParseOk(kDesignSketch);
  ASSERT_EQ(f.statements.size(), 1u);
  const Statement& policy = f.statements[0];
  ASSERT_EQ(policy.head.size(), 4u);
  EXPECT_EQ(Head(policy, 0).text, "policy");
  EXPECT_EQ(Head(policy, 1).kind, ValueKind::kString);
  EXPECT_EQ(Head(policy, 1).text, "python-untrusted");
  EXPECT_EQ(Head(policy, 2).text, "extends");
  EXPECT_EQ(Head(policy, 3).text, "base-untrusted");
  ASSERT_TRUE(policy.has_block);
  ASSERT_EQ(policy.block.size(), 12u);

  const Statement& limits = policy.block[2];
  EXPECT_EQ(Head(limits, 0).text, "limits");
  // `wall_time = 30s   cpu_time = 20s   memory = 512MiB` is three statements.
  ASSERT_EQ(limits.block.size(), 7u);
  EXPECT_EQ(Head(limits.block[0], 0).text, "wall_time");
  EXPECT_EQ(limits.block[0].assigned.kind, ValueKind::kQuantity);
  EXPECT_EQ(limits.block[0].assigned.number, 30u);
  EXPECT_EQ(limits.block[0].assigned.unit, "s");
  EXPECT_EQ(Head(limits.block[2], 0).text, "memory");
  EXPECT_EQ(limits.block[2].assigned.unit, "MiB");
  EXPECT_EQ(Head(limits.block[3], 0).text, "pids");
  EXPECT_EQ(limits.block[3].assigned.kind, ValueKind::kInteger);
  EXPECT_EQ(limits.block[3].assigned.number, 64u);

  const Statement& rootfs = policy.block[3];
  ASSERT_EQ(rootfs.head.size(), 3u);
  EXPECT_EQ(Head(rootfs, 2).kind, ValueKind::kList);
  EXPECT_EQ(Head(rootfs, 2).items.size(), 4u);
  EXPECT_EQ(Head(rootfs, 2).items[3].text, "/bin");

  const Statement& mount = policy.block[4];
  ASSERT_EQ(mount.head.size(), 4u);
  EXPECT_EQ(Head(mount, 3).text, "/tmp");
  ASSERT_EQ(mount.block.size(), 1u);
  EXPECT_EQ(mount.block[0].assigned.number, 64u);

  const Statement& env = policy.block[8];
  ASSERT_EQ(env.block.size(), 1u);
  const Statement& set = env.block[0];
  ASSERT_EQ(set.head.size(), 2u);
  EXPECT_EQ(Head(set, 1).text, "PYTHONDONTWRITEBYTECODE");
  EXPECT_EQ(set.assigned.text, "1");

  const Statement& syscalls = policy.block[9];
  ASSERT_EQ(syscalls.block.size(), 2u);
  EXPECT_EQ(Head(syscalls.block[1], 1).items.size(), 6u);
  EXPECT_EQ(Head(syscalls.block[1], 1).items[5].text, "io_uring_setup");

  const Statement& validate = policy.block[10];
  ASSERT_EQ(validate.block.size(), 3u);
  EXPECT_EQ(Head(validate.block[2], 1).kind, ValueKind::kRegex);
  EXPECT_EQ(Head(validate.block[2], 1).text, "AKIA[0-9A-Z]{16}");

  ASSERT_EQ(f.comments.size(), 1u);
  EXPECT_EQ(f.comments[0].text, " gvisor | microvm | native(trusted only)");
  EXPECT_EQ(f.comments[0].span.begin.line, 3u);
  EXPECT_EQ(f.comments[0].span.begin.column, 38u);
}

TEST(GrammarTest, AstHeaderExampleParses) {
  File f = ParseOk(kAstHeaderExample);
  ASSERT_EQ(f.statements.size(), 1u);
  const auto& block = f.statements[0].block;
  ASSERT_EQ(block.size(), 6u);
  EXPECT_EQ(block[0].block.size(), 2u);
  const Statement& over = block[5];
  ASSERT_EQ(over.annotations.size(), 1u);
  EXPECT_EQ(over.annotations[0].name, "override");
  ASSERT_EQ(over.annotations[0].args.size(), 1u);
  EXPECT_EQ(over.annotations[0].args[0].text, "SEC-123: pandas needs it");
  EXPECT_EQ(Head(over, 0).text, "memory");
  EXPECT_EQ(over.assigned.unit, "GiB");
}

TEST(GrammarTest, StatementForms) {
  File f = ParseOk(
      "a\n"
      "b c \"d\" 5 6s /r/ [x]\n"
      "e = 1\n"
      "f g = h { i }\n"
      "j {}\n"
      "k; l = 2; m\n"
      "n { } o { p = 1 }\n");
  ASSERT_EQ(f.statements.size(), 10u);
  EXPECT_FALSE(f.statements[0].has_assignment);
  EXPECT_FALSE(f.statements[0].has_block);
  EXPECT_EQ(f.statements[1].head.size(), 7u);
  EXPECT_EQ(f.statements[1].head[2].kind, ValueKind::kString);
  EXPECT_EQ(f.statements[1].head[3].kind, ValueKind::kInteger);
  EXPECT_EQ(f.statements[1].head[4].kind, ValueKind::kQuantity);
  EXPECT_EQ(f.statements[1].head[5].kind, ValueKind::kRegex);
  EXPECT_EQ(f.statements[1].head[6].kind, ValueKind::kList);
  EXPECT_TRUE(f.statements[2].has_assignment);
  const Statement& fg = f.statements[3];
  EXPECT_EQ(fg.head.size(), 2u);
  EXPECT_TRUE(fg.has_assignment);
  EXPECT_EQ(fg.assigned.text, "h");
  ASSERT_TRUE(fg.has_block);
  ASSERT_EQ(fg.block.size(), 1u);
  EXPECT_TRUE(f.statements[4].has_block);
  EXPECT_TRUE(f.statements[4].block.empty());
  EXPECT_EQ(f.statements[5].head[0].text, "k");
  EXPECT_EQ(f.statements[6].head[0].text, "l");
  EXPECT_EQ(f.statements[7].head[0].text, "m");
  EXPECT_EQ(f.statements[8].head[0].text, "n");
  EXPECT_EQ(f.statements[9].head[0].text, "o");
  EXPECT_EQ(f.statements[9].block.size(), 1u);
}

TEST(GrammarTest, AssignmentEndsAStatementOnTheSameLine) {
  File f = ParseOk("wall_time = 30s  cpu_time = 20s\tmemory=512MiB\n");
  ASSERT_EQ(f.statements.size(), 3u);
  EXPECT_EQ(f.statements[2].head[0].text, "memory");
  EXPECT_EQ(f.statements[2].assigned.number, 512u);
}

TEST(GrammarTest, Identifiers) {
  File f = ParseOk("_a A9 io_uring_setup base-untrusted v1.2.3 x-\n");
  const auto& h = f.statements[0].head;
  ASSERT_EQ(h.size(), 6u);
  EXPECT_EQ(h[0].text, "_a");
  EXPECT_EQ(h[3].text, "base-untrusted");
  EXPECT_EQ(h[4].text, "v1.2.3");
  EXPECT_EQ(h[5].text, "x-");
  for (const Value& v : h) EXPECT_EQ(v.kind, ValueKind::kIdent);
}

TEST(GrammarTest, StringEscapes) {
  File f = ParseOk(R"(s = "q\" b\\ n\n t\t r\r e\u{e9} smile\u{1F600} z\u{0}")"
                   "\n");
  EXPECT_EQ(f.statements[0].assigned.text,
            std::string("q\" b\\ n\n t\t r\r e\xC3\xA9 smile\xF0\x9F\x98\x80 z") + '\0');
}

TEST(GrammarTest, StringsKeepUtf8) {
  File f = ParseOk("s = \"grüße 日本\"\n");
  EXPECT_EQ(f.statements[0].assigned.text, "grüße 日本");
}

TEST(GrammarTest, Integers) {
  File f = ParseOk("a = 0\nb = 1_000_000\nc = 18446744073709551615\nd = 007\n");
  EXPECT_EQ(f.statements[0].assigned.number, 0u);
  EXPECT_EQ(f.statements[1].assigned.number, 1000000u);
  EXPECT_EQ(f.statements[2].assigned.number, 18446744073709551615u);
  EXPECT_EQ(f.statements[3].assigned.number, 7u);
  for (const Statement& s : f.statements) EXPECT_EQ(s.assigned.kind, ValueKind::kInteger);
}

TEST(GrammarTest, EveryUnitIsAQuantity) {
  for (const UnitInfo& u : Units()) {
    const std::string text = "x = 1_024" + std::string(u.name) + "\n";
    File f = ParseOk(text);
    ASSERT_EQ(f.statements.size(), 1u) << text;
    const Value& v = f.statements[0].assigned;
    EXPECT_EQ(v.kind, ValueKind::kQuantity) << text;
    EXPECT_EQ(v.number, 1024u);
    EXPECT_EQ(v.unit, u.name);
  }
}

TEST(GrammarTest, Regexes) {
  File f = ParseOk(R"(r /a\/b\d+\\/ /x/ /[\/]/)"
                   "\n");
  const auto& h = f.statements[0].head;
  ASSERT_EQ(h.size(), 4u) << FormatValue(h.back());
  // `\/` is the delimiter escaped; `\d` and `\\` are kept for RE2.
  EXPECT_EQ(h[1].text, R"(a/b\d+\\)");
  EXPECT_EQ(h[2].text, "x");
  // A `/` ends the regex even inside a class: it must be escaped there too.
  EXPECT_EQ(h[3].text, "[/]");
}

TEST(GrammarTest, RegexAfterNameWithoutSpace) {
  File f = ParseOk("reject/ab/\n");
  ASSERT_EQ(f.statements[0].head.size(), 2u);
  EXPECT_EQ(f.statements[0].head[1].kind, ValueKind::kRegex);
}

TEST(GrammarTest, Lists) {
  File f = ParseOk(
      "a = []\n"
      "b = [1, 2,]\n"
      "c = [\n"
      "  x,  # first\n"
      "  # own line\n"
      "  [y, [z]],\n"
      "\n"
      "]\n"
      "d = [\"s\", 5MiB, /r/]\n");
  ASSERT_EQ(f.statements.size(), 4u);
  EXPECT_TRUE(f.statements[0].assigned.items.empty());
  EXPECT_EQ(f.statements[1].assigned.items.size(), 2u);
  const Value& c = f.statements[2].assigned;
  ASSERT_EQ(c.items.size(), 2u);
  EXPECT_EQ(c.items[1].items[1].items[0].text, "z");
  EXPECT_EQ(f.comments.size(), 2u);
  EXPECT_EQ(f.statements[3].assigned.items[1].unit, "MiB");
}

TEST(GrammarTest, Annotations) {
  File f = ParseOk(
      "@override(\"SEC-1\") @flag memory = 1GiB\n"
      "@reviewed(\"alice\", 2024, [a, b],)\n"
      "# a comment between\n"
      "\n"
      "@empty()\n"
      "limits { x = 1 }\n");
  ASSERT_EQ(f.statements.size(), 2u);
  const Statement& a = f.statements[0];
  ASSERT_EQ(a.annotations.size(), 2u);
  EXPECT_EQ(a.annotations[0].name, "override");
  EXPECT_EQ(a.annotations[1].name, "flag");
  EXPECT_TRUE(a.annotations[1].args.empty());
  const Statement& b = f.statements[1];
  ASSERT_EQ(b.annotations.size(), 2u);
  EXPECT_EQ(b.annotations[0].args.size(), 3u);
  EXPECT_EQ(b.annotations[0].args[1].number, 2024u);
  EXPECT_EQ(b.annotations[1].name, "empty");
  EXPECT_EQ(b.head[0].text, "limits");
  // The statement's span starts at its first annotation.
  EXPECT_EQ(b.span.begin.line, 2u);
  EXPECT_EQ(b.span.begin.column, 1u);
}

TEST(GrammarTest, CommentsAreCollected) {
  File f = ParseOk("# top\na = 1 # trailing\n  #indented\n#\n");
  ASSERT_EQ(f.comments.size(), 4u);
  EXPECT_EQ(f.comments[0].text, " top");
  EXPECT_EQ(f.comments[1].text, " trailing");
  EXPECT_EQ(f.comments[1].span.begin.line, 2u);
  EXPECT_EQ(f.comments[1].span.begin.column, 7u);
  EXPECT_EQ(f.comments[2].text, "indented");
  EXPECT_EQ(f.comments[3].text, "");
}

TEST(GrammarTest, CrLfLineEnds) {
  File f = ParseOk("a = 1\r\nb {\r\n  c = [x,\r\n y]  # k\r\n}\r\n");
  ASSERT_EQ(f.statements.size(), 2u);
  EXPECT_EQ(f.statements[1].block[0].assigned.items.size(), 2u);
  ASSERT_EQ(f.comments.size(), 1u);
  EXPECT_EQ(f.comments[0].text, " k");  // no \r
  EXPECT_EQ(f.statements[1].span.begin.line, 2u);
  EXPECT_EQ(f.statements[1].block_span.end.line, 5u);
}

TEST(GrammarTest, ByteOrderMarkAtStartIsSkipped) {
  File f = ParseOk(
      "\xEF\xBB\xBF"
      "a = 1\n");
  ASSERT_EQ(f.statements.size(), 1u);
  EXPECT_EQ(f.statements[0].span.begin.column, 4u);  // columns count bytes
}

TEST(GrammarTest, EmptyAndBlankFiles) {
  EXPECT_TRUE(ParseOk("").statements.empty());
  EXPECT_TRUE(ParseOk("\n\n   \n\t\n").statements.empty());
  EXPECT_TRUE(ParseOk("# only a comment").statements.empty());
  EXPECT_TRUE(ParseOk(";;;").statements.empty());
}

TEST(GrammarTest, NoFinalNewline) {
  File f = ParseOk("a = 1");
  ASSERT_EQ(f.statements.size(), 1u);
  f = ParseOk("a { b = [1] }");
  ASSERT_EQ(f.statements.size(), 1u);
}

TEST(SpanTest, ValuesStatementsAndBlocks) {
  const char* text =
      "policy \"p\" {\n"     // 1
      "  memory = 512MiB\n"  // 2
      "  deny [a,\n"         // 3
      "    b]\n"             // 4
      "}\n";                 // 5
  File f = ParseOk(text);
  const Statement& policy = f.statements[0];
  EXPECT_EQ(policy.span.begin.line, 1u);
  EXPECT_EQ(policy.span.begin.column, 1u);
  EXPECT_EQ(policy.span.begin.offset, 0u);
  EXPECT_EQ(policy.span.end.line, 5u);
  EXPECT_EQ(policy.span.end.column, 2u);
  EXPECT_EQ(policy.block_span.begin.line, 1u);
  EXPECT_EQ(policy.block_span.begin.column, 12u);
  EXPECT_EQ(policy.block_span.end.line, 5u);
  EXPECT_EQ(policy.block_span.end.column, 2u);
  const Value& p = policy.head[1];
  EXPECT_EQ(p.span.begin.column, 8u);
  EXPECT_EQ(p.span.end.column, 11u);  // exclusive: the closing quote is included

  const Statement& memory = policy.block[0];
  EXPECT_EQ(memory.span.begin.line, 2u);
  EXPECT_EQ(memory.span.begin.column, 3u);
  EXPECT_EQ(memory.span.end.line, 2u);
  EXPECT_EQ(memory.span.end.column, 18u);
  EXPECT_EQ(memory.assigned.span.begin.column, 12u);
  EXPECT_EQ(memory.assigned.span.end.column, 18u);
  EXPECT_EQ(memory.assigned.span.begin.offset, 24u);

  const Statement& deny = policy.block[1];
  const Value& list = deny.head[1];
  EXPECT_EQ(list.span.begin.line, 3u);
  EXPECT_EQ(list.span.begin.column, 8u);
  EXPECT_EQ(list.span.end.line, 4u);
  EXPECT_EQ(list.span.end.column, 7u);
  EXPECT_EQ(list.items[1].span.begin.line, 4u);
  EXPECT_EQ(list.items[1].span.begin.column, 5u);
  EXPECT_EQ(deny.span.end.line, 4u);
  EXPECT_EQ(deny.span.end.column, 7u);
}

TEST(SpanTest, AnnotationSpan) {
  File f = ParseOk("  @override(\"x\") memory = 1GiB\n");
  const Annotation& a = f.statements[0].annotations[0];
  EXPECT_EQ(a.span.begin.column, 3u);
  EXPECT_EQ(a.span.end.column, 17u);
  EXPECT_EQ(f.statements[0].span.begin.column, 3u);
  EXPECT_EQ(f.statements[0].span.end.column, 31u);
}

TEST(SpanTest, MultiByteCharactersCountAsBytes) {
  File f = ParseOk("s = \"é\" t = 1\n");
  EXPECT_EQ(f.statements[1].span.begin.column, 10u);  // é is two bytes
}

}  // namespace
}  // namespace safex::dsl
