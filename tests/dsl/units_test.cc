// Units, scaling to base units, and "did you mean" suggestions.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dsl/diagnostics.h"
#include "dsl/parser.h"
#include "tests/dsl/dsl_test_util.h"

namespace safex::dsl {
namespace {

TEST(UnitsTest, Table) {
  std::vector<std::string> names;
  for (const UnitInfo& u : Units()) names.emplace_back(u.name);
  EXPECT_EQ(names, (std::vector<std::string>{"B", "KiB", "MiB", "GiB", "TiB", "ns", "us", "ms", "s",
                                             "m", "h"}));
  EXPECT_EQ(FindUnit("MiB")->scale, 1048576u);
  EXPECT_EQ(FindUnit("MiB")->kind, UnitKind::kSize);
  EXPECT_EQ(FindUnit("TiB")->scale, 1099511627776u);
  EXPECT_EQ(FindUnit("us")->scale, 1000u);
  EXPECT_EQ(FindUnit("s")->scale, 1000000000u);
  EXPECT_EQ(FindUnit("m")->scale, 60000000000u);
  EXPECT_EQ(FindUnit("h")->scale, 3600000000000u);
  EXPECT_EQ(FindUnit("h")->kind, UnitKind::kDuration);
  EXPECT_EQ(FindUnit("M"), nullptr);
  EXPECT_EQ(FindUnit("mib"), nullptr);
  EXPECT_EQ(FindUnit(""), nullptr);
}

TEST(UnitsTest, ToBaseUnits) {
  const File f =
      testing::ParseOk("a = 512MiB\nb = 30s\nc = 16777215TiB\nd = 5124095h\ne = 7\nf = 0GiB\n");
  uint64_t v = 0;
  ASSERT_TRUE(ToBaseUnits(f.statements[0].assigned, &v));
  EXPECT_EQ(v, 512u * 1024 * 1024);
  ASSERT_TRUE(ToBaseUnits(f.statements[1].assigned, &v));
  EXPECT_EQ(v, 30000000000u);
  ASSERT_TRUE(ToBaseUnits(f.statements[2].assigned, &v));
  EXPECT_EQ(v, 16777215ull << 40);
  ASSERT_TRUE(ToBaseUnits(f.statements[3].assigned, &v));
  EXPECT_EQ(v, 5124095ull * 3600000000000ull);
  v = 42;
  EXPECT_FALSE(ToBaseUnits(f.statements[4].assigned, &v));  // an integer, not a quantity
  EXPECT_EQ(v, 42u);
  ASSERT_TRUE(ToBaseUnits(f.statements[5].assigned, &v));
  EXPECT_EQ(v, 0u);

  Value big;
  big.kind = ValueKind::kQuantity;
  big.number = 16777216;
  big.unit = "TiB";
  EXPECT_FALSE(ToBaseUnits(big, &v));
  big.number = std::numeric_limits<uint64_t>::max();
  big.unit = "B";
  ASSERT_TRUE(ToBaseUnits(big, &v));
  EXPECT_EQ(v, std::numeric_limits<uint64_t>::max());
  big.unit = "KiB";
  EXPECT_FALSE(ToBaseUnits(big, &v));
  big.unit = "MB";
  big.number = 1;
  EXPECT_FALSE(ToBaseUnits(big, &v));
}

TEST(ClosestMatchTest, Suggestions) {
  const std::vector<std::string_view> words = {"memory",     "wall_time", "cpu_time", "pids",
                                               "open_files", "output",    "disk"};
  EXPECT_EQ(ClosestMatch("memroy", words), "memory");  // transposition
  EXPECT_EQ(ClosestMatch("Memory", words), "memory");  // case
  EXPECT_EQ(ClosestMatch("wall_tme", words), "wall_time");
  EXPECT_EQ(ClosestMatch("walltime", words), "wall_time");
  EXPECT_EQ(ClosestMatch("pid", words), "pids");
  EXPECT_EQ(ClosestMatch("outptu", words), "output");
  EXPECT_EQ(ClosestMatch("network", words), "");
  EXPECT_EQ(ClosestMatch("x", words), "");
  EXPECT_EQ(ClosestMatch("", words), "");
  EXPECT_EQ(ClosestMatch("memory", words), "");  // the word itself is not a suggestion
  EXPECT_EQ(ClosestMatch("memroy", {}), "");
  EXPECT_EQ(ClosestMatch(std::string(5000, 'm'), words), "");  // bounded cost
}

}  // namespace
}  // namespace safex::dsl
