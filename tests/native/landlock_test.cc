// Landlock rules derived from a plan's mounts, per ABI, and the fallback when the kernel has none.
#include "drivers/native/landlock.h"

#include <gtest/gtest.h>
#include <linux/landlock.h>

#include <map>

#include "tests/drivers/test_plans.h"

namespace safex::drivers::native {
namespace {

constexpr uint64_t kTruncate = 1ULL << 14;  // ABI 3

plan::Plan ToolPlan() {
  plan::Plan p = testing::BasePlan();
  p.trust = plan::Trust::kTrusted;
  p.backend = plan::Backend::kNative;
  p.mounts = {testing::BindRo("/usr"), testing::Tmpfs("/tmp", 8ull << 20),
              testing::Input("/data/in"), testing::Output("/data/out", 4ull << 20)};
  return p;
}

std::map<std::string, uint64_t> ByPath(const LandlockRuleset& r) {
  std::map<std::string, uint64_t> out;
  for (const LandlockRule& rule : r.rules) out[rule.path] = rule.access;
  return out;
}

TEST(LandlockTest, WithoutLandlockNothingIsAppliedAndTheRecordSaysNone) {
  const LandlockRuleset r = LandlockRulesFor(ToolPlan(), 0);
  EXPECT_EQ(r.abi, 0);
  EXPECT_EQ(r.handled, 0u);
  EXPECT_TRUE(r.rules.empty());
  EXPECT_EQ(DescribeRuleset(r), "none");
  int failed = 7;
  EXPECT_EQ(ApplyLandlock(0, 0, nullptr, 0, &failed), 0);  // a no-op, never an error
}

TEST(LandlockTest, ReadEverywhereExecuteWhereNotNoexecWriteOnlyInWritableMounts) {
  const LandlockRuleset r = LandlockRulesFor(ToolPlan(), 3);
  const std::map<std::string, uint64_t> rules = ByPath(r);
  const uint64_t read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  EXPECT_EQ(rules.at("/"), read);
  EXPECT_EQ(rules.at("/usr"), LANDLOCK_ACCESS_FS_EXECUTE);
  // The input is read-only and noexec: nothing beyond what "/" grants.
  EXPECT_EQ(rules.count("/data/in"), 0u);
  for (const char* w : {"/tmp", "/data/out", "/dev/shm"}) {
    const uint64_t a = rules.at(w);
    EXPECT_NE(a & LANDLOCK_ACCESS_FS_WRITE_FILE, 0u) << w;
    EXPECT_NE(a & LANDLOCK_ACCESS_FS_MAKE_REG, 0u) << w;
    EXPECT_NE(a & LANDLOCK_ACCESS_FS_REMOVE_FILE, 0u) << w;
    EXPECT_NE(a & kTruncate, 0u) << w;
    EXPECT_EQ(a & LANDLOCK_ACCESS_FS_EXECUTE, 0u) << w << " is noexec";
    EXPECT_EQ(a & (LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK), 0u) << w;
  }
  EXPECT_EQ(rules.at("/dev"), static_cast<uint64_t>(LANDLOCK_ACCESS_FS_WRITE_FILE));
  // Device nodes are handled (so denied) and granted nowhere.
  EXPECT_NE(r.handled & LANDLOCK_ACCESS_FS_MAKE_CHAR, 0u);
  for (const LandlockRule& rule : r.rules) {
    EXPECT_EQ(rule.access & ~r.handled, 0u) << rule.path << ": a right the ABI does not handle";
  }
}

TEST(LandlockTest, AnOlderAbiHandlesOnlyTheRightsItKnows) {
  const LandlockRuleset v1 = LandlockRulesFor(ToolPlan(), 1);
  EXPECT_EQ(v1.handled & LANDLOCK_ACCESS_FS_REFER, 0u);
  EXPECT_EQ(v1.handled & kTruncate, 0u);
  for (const LandlockRule& rule : v1.rules) EXPECT_EQ(rule.access & ~v1.handled, 0u) << rule.path;
  const LandlockRuleset v2 = LandlockRulesFor(ToolPlan(), 2);
  EXPECT_NE(v2.handled & LANDLOCK_ACCESS_FS_REFER, 0u);
  EXPECT_EQ(v2.handled & kTruncate, 0u);
  // A newer kernel than this code knows: the rights it knows, all of them handled.
  const LandlockRuleset v7 = LandlockRulesFor(ToolPlan(), 7);
  EXPECT_EQ(v7.handled, LandlockRulesFor(ToolPlan(), 3).handled);
  EXPECT_EQ(DescribeRuleset(v7).rfind("abi 7:", 0), 0u) << DescribeRuleset(v7);
}

TEST(LandlockTest, AnExecutableWritableBindGetsBoth) {
  plan::Plan p = ToolPlan();
  plan::Mount m = testing::BindRo("/srv/cache");
  m.read_only = false;
  p.mounts.push_back(m);
  const uint64_t a = ByPath(LandlockRulesFor(p, 3)).at("/srv/cache");
  EXPECT_NE(a & LANDLOCK_ACCESS_FS_EXECUTE, 0u);
  EXPECT_NE(a & LANDLOCK_ACCESS_FS_WRITE_FILE, 0u);
}

}  // namespace
}  // namespace safex::drivers::native
