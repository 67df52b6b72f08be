// The canonical encoding is injective: no two different events encode the same bytes.
// Proven two ways: DecodeEvent is a left inverse of EncodeEvent (so Encode cannot merge two rows),
// checked on random rows over a hostile alphabet; and directly, by hashing many random rows and
// near-miss pairs and finding no shared encoding. The record -> row step is covered too.
#include "audit/canonical.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "audit/event_row.h"
#include "audit/json_bytes.h"
#include "tests/audit/audit_test_util.h"

namespace safex::audit {
namespace {

using testing::RandomRow;

TEST(CanonicalTest, DecodeInvertsEncodeOnRandomRows) {
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 20000; ++i) {
    EventRow row = RandomRow(rng);
    std::string enc = EncodeEvent(row);
    auto back = DecodeEvent(enc);
    ASSERT_TRUE(back.ok()) << back.status().message();
    ASSERT_EQ(*back, row) << "row " << i;
  }
}

TEST(CanonicalTest, NoTwoRandomRowsShareAnEncoding) {
  std::mt19937_64 rng(777);
  std::map<std::string, EventRow> seen;
  for (int i = 0; i < 20000; ++i) {
    EventRow row = RandomRow(rng);
    auto [it, inserted] = seen.emplace(EncodeEvent(row), row);
    if (!inserted) {
      ASSERT_EQ(it->second, row) << "two different rows share an encoding";
    }
  }
}

TEST(CanonicalTest, NearMissesEncodeDifferently) {
  EventRow base;
  for (auto& v : base.values) v = std::monostate{};
  std::vector<EventRow> rows;
  auto with = [&](size_t col, SqlValue v, size_t col2 = kNumEventColumns, SqlValue v2 = {}) {
    EventRow r = base;
    r.values[col] = std::move(v);
    if (col2 < kNumEventColumns) r.values[col2] = std::move(v2);
    rows.push_back(r);
  };
  rows.push_back(base);
  with(kColReason, std::string());         // "" vs NULL
  with(kColReason, int64_t{0});            // 0 vs "" vs NULL
  with(kColReason, std::string("\0", 1));  // NUL byte vs ""
  with(kColPolicyName, std::string("ab"), kColPlanDigest, std::string("c"));
  with(kColPolicyName, std::string("a"), kColPlanDigest, std::string("bc"));
  with(kColBackend, std::string("x"));
  with(kColBackendMode, std::string("x"));  // same value, neighbouring column
  with(kColSeq, int64_t{1});
  with(kColSeq, int64_t{256});
  with(kColSeq, int64_t{-1});
  with(kColSeq, std::string("1"));  // integer 1 vs text "1"
  // A text that contains what looks like the next field's encoding.
  with(kColRunId, std::string("\x06time_nsI", 9));
  std::set<std::string> encodings;
  for (const auto& r : rows) encodings.insert(EncodeEvent(r));
  EXPECT_EQ(encodings.size(), rows.size());
}

TEST(CanonicalTest, DecodeRejectsWhatEncodeCannotProduce) {
  EventRow row;
  row.values[kColSeq] = int64_t{7};
  row.values[kColKind] = std::string("start");
  std::string enc = EncodeEvent(row);
  // Every strict prefix and every extension is rejected: the encoding is prefix-free.
  for (size_t n = 0; n < enc.size(); ++n) {
    EXPECT_FALSE(DecodeEvent(enc.substr(0, n)).ok()) << "prefix " << n;
  }
  EXPECT_FALSE(DecodeEvent(enc + "x").ok());
  // Unknown tag, wrong field name, wrong version.
  std::string bad = enc;
  bad[enc.find("seq") + 3] = 'X';
  EXPECT_FALSE(DecodeEvent(bad).ok());
  bad = enc;
  bad[enc.find("seq")] = 'z';
  EXPECT_FALSE(DecodeEvent(bad).ok());
  bad = enc;
  bad[18] = 2;
  EXPECT_FALSE(DecodeEvent(bad).ok());
}

// Pins the byte format documented in canonical.h and docs/audit.md.
TEST(CanonicalTest, GoldenEncoding) {
  EventRow row;
  row.values[kColSeq] = int64_t{1};
  row.values[kColKind] = std::string("start");
  std::string enc = EncodeEvent(row);
  const std::string head(
      "safex-audit-event\0\x01\x00\x1d"
      "\x03seqI\0\0\0\0\0\0\0\x01"
      "\x04kindT\0\0\0\x05start"
      "\x06run_idN",
      18 + 1 + 2 + 13 + 15 + 8);
  EXPECT_EQ(enc.substr(0, head.size()), head);
  EXPECT_EQ(enc.substr(enc.size() - 8), std::string("\x06reasonN"));
}

// Schema version 2: a row that uses none of the new columns keeps the version 1 encoding (29
// columns, as GoldenEncoding pins), so a migrated log's old hashes and every ordinary new event
// are unchanged; one that uses them is encoded with all 31. A 31-column encoding of a row
// without them is not canonical and is refused.
TEST(CanonicalTest, VersionTwoColumnsAreEncodedOnlyWhenUsed) {
  EventRow row;
  row.values[kColSeq] = int64_t{1};
  row.values[kColKind] = std::string("start");
  const std::string v1 = EncodeEvent(row);
  EXPECT_EQ(v1.substr(19, 2), std::string("\x00\x1d", 2));
  row.values[kColPurpose] = std::string("test p/t");
  const std::string v2 = EncodeEvent(row);
  EXPECT_EQ(v2.substr(19, 2), std::string("\x00\x1f", 2));
  EXPECT_EQ(v2.substr(0, 19), v1.substr(0, 19));
  EXPECT_EQ(v2.substr(v2.size() - 13), std::string("\x0b"
                                                   "enforcementN"));
  auto back = DecodeEvent(v2);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, row);
  // The same 31 columns with the new ones NULL: not what EncodeEvent writes.
  std::string forged = v2;
  const std::string purpose_text("\x07purposeT\0\0\0\x08test p/t", 1 + 7 + 1 + 4 + 8);
  forged.replace(forged.find(purpose_text), purpose_text.size(), std::string("\x07purposeN"));
  EXPECT_FALSE(DecodeEvent(forged).ok());
}

TEST(CanonicalTest, ChainHashDependsOnPreviousHashAndLogId) {
  EventRow row;
  std::string enc = EncodeEvent(row);
  EXPECT_NE(GenesisHash("a"), GenesisHash("b"));
  EXPECT_NE(ChainHash(GenesisHash("a"), enc), ChainHash(GenesisHash("b"), enc));
  auto d = DigestFromHex(ToHex(GenesisHash("a")));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d, GenesisHash("a"));
  EXPECT_FALSE(DigestFromHex(std::string(64, 'A')).has_value());
  EXPECT_FALSE(DigestFromHex("abc").has_value());
}

// Record -> row: list fields must not collide either.
TEST(CanonicalTest, RecordListsMapInjectively) {
  std::vector<std::vector<std::string>> argvs = {
      {},
      {""},
      {"", ""},
      {"a b"},
      {"a", "b"},
      {"ab"},
      {"a,b"},
      {"\"a\",\"b\""},
      {"{\"hex\":\"ff\"}"},
      {"\xff"},
      {"\xc3\xa9"},
      {"\xc3"},
      {"\\u00ff"},
  };
  std::set<std::string> seen;
  for (const auto& argv : argvs) {
    RunStart s = testing::SampleStart("run-1");
    s.argv = argv;
    auto row = RowFromStart(s, 1);
    ASSERT_TRUE(row.ok());
    EXPECT_TRUE(seen.insert(EncodeEvent(*row)).second);
    auto back = DecodeStringList(row->text(kColArgv));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, argv);
  }
}

TEST(CanonicalTest, RandomArgvRoundTripsThroughJson) {
  std::mt19937_64 rng(99);
  for (int i = 0; i < 5000; ++i) {
    std::vector<std::string> argv(rng() % 4);
    for (auto& a : argv) a = testing::RandomBytes(rng, 6);
    auto back = DecodeStringList(EncodeStringList(argv));
    ASSERT_TRUE(back.ok());
    ASSERT_EQ(*back, argv);
    std::vector<ValidatorResult> vr = {{argv.empty() ? "" : argv[0], "x\xff", "d"}};
    auto vback = DecodeValidatorResults(EncodeValidatorResults(vr));
    ASSERT_TRUE(vback.ok());
    ASSERT_EQ(*vback, vr);
  }
}

// Issue 12: the JSON columns are read back strictly (they are hashed as text; a duplicate key or
// a BOM was not written by safex).
TEST(CanonicalTest, StoredJsonColumnsAreReadStrictly) {
  EXPECT_TRUE(DecodeStringList(R"(["a",{"hex":"ff"}])").ok());
  auto dup = DecodeStringList(R"(["a",{"hex":"ff","hex":"00"}])");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), Status::Code::kDataLoss);
  EXPECT_NE(dup.status().message().find("duplicate key"), std::string::npos);
  EXPECT_FALSE(DecodeStringList("\xEF\xBB\xBF[\"a\"]").ok());
  EXPECT_FALSE(DecodeValidatorResults(
                   R"([{"name":"a","outcome":"accepted","outcome":"rejected","detail":""}])")
                   .ok());
  EXPECT_FALSE(DecodeDeniedEgress(R"([{"destination":"x:1","count":1,"count":2}])").ok());
}

TEST(CanonicalTest, RowValidation) {
  RunStart s = testing::SampleStart("bad id with spaces");
  EXPECT_EQ(RowFromStart(s, 1).status().code(), Status::Code::kInvalidArgument);
  s = testing::SampleStart("ok-id");
  s.start_time_ns = -5;
  EXPECT_EQ(RowFromStart(s, 1).status().code(), Status::Code::kInvalidArgument);
  s.start_time_ns = 0;
  s.plan_digest = "NOT-HEX";
  EXPECT_EQ(RowFromStart(s, 1).status().code(), Status::Code::kInvalidArgument);
  RunEnd e = testing::SampleEnd("ok-id");
  e.wall_ns = ~uint64_t{0};
  EXPECT_EQ(RowFromEnd(e, 1).status().code(), Status::Code::kInvalidArgument);
  e = testing::SampleEnd("ok-id", Verdict::kRefused);  // refused without its evidence
  EXPECT_EQ(RowFromEnd(e, 1).status().code(), Status::Code::kInvalidArgument);
  e = testing::SampleEnd("ok-id", Verdict::kInterrupted);
  EXPECT_EQ(RowFromEnd(e, 1).status().code(), Status::Code::kInvalidArgument);
  Refusal r;
  r.run_id = "x";
  EXPECT_EQ(RowFromRefusal(r, 1).status().code(), Status::Code::kInvalidArgument);  // no reason
  EXPECT_FALSE(IsValidRunId(""));
  EXPECT_FALSE(IsValidRunId(std::string(65, 'a')));
  EXPECT_TRUE(IsValidRunId(std::string(64, 'a')));
  EXPECT_FALSE(IsValidRunId("a*"));
  EXPECT_FALSE(IsValidRunId("a\x1b[31m"));
}

}  // namespace
}  // namespace safex::audit
