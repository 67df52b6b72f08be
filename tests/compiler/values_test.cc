#include "compiler/values.h"

#include <gtest/gtest.h>

namespace safex::compiler {
namespace {

dsl::Value Q(uint64_t n, const char* unit) {
  dsl::Value v;
  v.kind = dsl::ValueKind::kQuantity;
  v.number = n;
  v.unit = unit;
  return v;
}

TEST(ValuesTest, QuantitiesScaleToBaseUnitsAndCheckTheirKind) {
  std::vector<dsl::Diagnostic> out;
  Diags d("x.policy", &out);
  EXPECT_EQ(ReadSize(Q(64, "MiB"), d, "memory"), 64ULL << 20);
  EXPECT_EQ(ReadDuration(Q(30, "s"), d, "wall_time"), 30'000'000'000ULL);
  EXPECT_EQ(ReadDuration(Q(2, "m"), d, "wall_time"), 120'000'000'000ULL);
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(ReadSize(Q(30, "s"), d, "memory"));
  EXPECT_FALSE(ReadDuration(Q(1, "GiB"), d, "wall_time"));
  EXPECT_FALSE(ReadSize(Q(UINT64_MAX / 2, "TiB"), d, "memory"));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].code, "E022");
  EXPECT_EQ(out[1].code, "E022");
  EXPECT_EQ(out[2].code, "E023");
  dsl::Value i;
  i.kind = dsl::ValueKind::kInteger;
  i.number = 512;
  EXPECT_FALSE(ReadSize(i, d, "memory"));
  EXPECT_EQ(out.back().help, "write it with a unit, e.g. `512MiB`");
  EXPECT_EQ(ReadInteger(i, d, "pids", 1, 1024), 512u);
  EXPECT_FALSE(ReadInteger(i, d, "pids", 1, 100));
  EXPECT_EQ(out.back().code, "E023");
}

TEST(ValuesTest, HumanUnitsAreExact) {
  EXPECT_EQ(FormatSize(512ULL << 20), "512MiB");
  EXPECT_EQ(FormatSize(1536), "1536B");
  EXPECT_EQ(FormatSize(3ULL << 40), "3TiB");
  EXPECT_EQ(FormatDuration(90'000'000'000ULL), "90s");
  EXPECT_EQ(FormatDuration(3600'000'000'000ULL), "1h");
  EXPECT_EQ(FormatDuration(1500'000'000ULL), "1500ms");
  EXPECT_EQ(FormatDuration(7), "7ns");
}

TEST(ValuesTest, ErrnoNames) {
  EXPECT_EQ(ErrnoFromName("ENOSYS"), 38);
  EXPECT_EQ(ErrnoFromName("EPERM"), 1);
  EXPECT_FALSE(ErrnoFromName("ENOSYSS"));
  EXPECT_EQ(ErrnoName(38), "ENOSYS");
  EXPECT_EQ(ErrnoName(4000), "4000");
}

TEST(ValuesTest, ChoicesSuggestTheClosest) {
  std::vector<dsl::Diagnostic> out;
  Diags d("x.policy", &out);
  dsl::Value v;
  v.kind = dsl::ValueKind::kIdent;
  v.text = "gvisr";
  EXPECT_FALSE(ReadChoice(v, d, "isolation backend", {"gvisor", "microvm", "native"}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code, "E026");
  EXPECT_EQ(out[0].help, "did you mean `gvisor`?");
}

}  // namespace
}  // namespace safex::compiler
