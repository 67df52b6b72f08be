#include "supervisor/output/glob.h"

#include <gtest/gtest.h>

namespace safex::output {
namespace {

TEST(GlobTest, LiteralPath) {
  PathGlob g("/data/out/result.json");
  EXPECT_TRUE(g.IsLiteral());
  EXPECT_TRUE(g.Matches("/data/out/result.json"));
  EXPECT_TRUE(g.Matches("/data/out//result.json"));
  EXPECT_FALSE(g.Matches("/data/out/result.jso"));
  EXPECT_FALSE(g.Matches("/data/out/result.json/x"));
  EXPECT_TRUE(g.CouldMatchBeneath("/data/out"));
  EXPECT_TRUE(g.CouldMatchBeneath("/data"));
  EXPECT_FALSE(g.CouldMatchBeneath("/data/out/result.json"));
  EXPECT_FALSE(g.CouldMatchBeneath("/data/other"));
}

TEST(GlobTest, StarQuestionAndClassesStayInOneComponent) {
  PathGlob g("/out/*.json");
  EXPECT_FALSE(g.IsLiteral());
  EXPECT_TRUE(g.Matches("/out/a.json"));
  EXPECT_TRUE(g.Matches("/out/.json"));
  EXPECT_TRUE(g.Matches("/out/.hidden.json"));
  EXPECT_FALSE(g.Matches("/out/sub/a.json"));
  EXPECT_FALSE(g.CouldMatchBeneath("/out/sub"));
  PathGlob q("/out/r?.[a-c]x[!0-9]");
  EXPECT_TRUE(q.Matches("/out/r1.bxz"));
  EXPECT_FALSE(q.Matches("/out/r1.dxz"));
  EXPECT_FALSE(q.Matches("/out/r1.bx5"));
  EXPECT_FALSE(q.Matches("/out/r12.bxz"));
  PathGlob esc("/out/a\\*b");
  EXPECT_TRUE(esc.IsLiteral());
  EXPECT_TRUE(esc.Matches("/out/a*b"));
  EXPECT_FALSE(esc.Matches("/out/axb"));
  PathGlob unclosed("/out/[ab");
  EXPECT_TRUE(unclosed.Matches("/out/[ab"));
}

TEST(GlobTest, GlobstarMatchesAnyDepth) {
  PathGlob g("/out/**/*.txt");
  EXPECT_TRUE(g.Matches("/out/a.txt"));
  EXPECT_TRUE(g.Matches("/out/x/a.txt"));
  EXPECT_TRUE(g.Matches("/out/x/y/z/a.txt"));
  EXPECT_FALSE(g.Matches("/out/x/y/z/a.txt2"));
  EXPECT_TRUE(g.CouldMatchBeneath("/out/x/y"));
  PathGlob all("/out/**");
  EXPECT_TRUE(all.Matches("/out/anything/at/all"));
  EXPECT_TRUE(all.CouldMatchBeneath("/out/a"));
}

TEST(GlobTest, HostileNamesMatchInBoundedTime) {
  // A pattern with many stars against a long name without a match: the greedy matcher is
  // O(name * pattern), never exponential.
  PathGlob g("/o/*a*a*a*a*a*a*a*a*a*a*b");
  const std::string name = "/o/" + std::string(255, 'a');
  EXPECT_FALSE(g.Matches(name));
}

}  // namespace
}  // namespace safex::output
