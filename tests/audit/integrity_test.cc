// CheckIntegrity (full and incremental, with the integrity marker) and MakeCheckpoint's refusal
// to sign a damaged log (issue 12: a corrupted log was used and signed).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <vector>

#include "audit/audit_log.h"
#include "tests/audit/audit_test_util.h"

namespace safex::audit {
namespace {

using testing::BulkAppend;
using testing::RawQuery;
using testing::RawSql;
using testing::SampleEnd;
using testing::SampleStart;
using testing::TempDir;

std::unique_ptr<AuditLog> OpenOrDie(const std::string& path, const AuditOptions& o) {
  auto log = AuditLog::Open(path, o);
  EXPECT_TRUE(log.ok()) << log.status().message();
  return log.ok() ? std::move(log).value() : nullptr;
}

VerifyReport Check(AuditLog& log, IntegrityCheck kind,
                   std::chrono::seconds max_full_age = kDefaultMaxFullCheckAge) {
  auto rep = log.CheckIntegrity(kind, max_full_age);
  EXPECT_TRUE(rep.ok()) << rep.status().message();
  return rep.ok() ? *rep : VerifyReport{};
}

// Pages whose b-tree header says "interior table page" (type 0x05), in file order. Page 1 is
// skipped (its header follows the 100-byte file header and it is the schema's root).
std::vector<int64_t> InteriorTablePages(const std::string& path) {
  const int64_t page_size = std::stoll(RawQuery(path, "PRAGMA page_size"));
  std::ifstream in(path, std::ios::binary);
  std::vector<int64_t> pages;
  std::vector<char> page(static_cast<size_t>(page_size));
  for (int64_t n = 1; in.read(page.data(), page_size); ++n) {
    if (n > 1 && page[0] == 0x05) pages.push_back(n);
  }
  return pages;
}

void OverwritePageWithRandomBytes(const std::string& path, int64_t page_no) {
  const int64_t page_size = std::stoll(RawQuery(path, "PRAGMA page_size"));
  std::mt19937_64 rng(12);
  std::string junk(static_cast<size_t>(page_size), '\0');
  for (auto& c : junk) c = static_cast<char>(rng());
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp((page_no - 1) * page_size);
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  ASSERT_TRUE(f.good());
}

class IntegrityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.File("audit.db");
    options_ = testing::TestOptions(dir_);
    log_ = OpenOrDie(db_, options_);
    ASSERT_TRUE(log_);
  }

  void AppendRuns(int n, const std::string& prefix) {
    for (int i = 0; i < n; ++i) {
      std::string id = prefix + "-" + std::to_string(i);
      ASSERT_TRUE(log_->RecordStart(SampleStart(id)).ok());
      ASSERT_TRUE(log_->RecordEnd(SampleEnd(id)).ok());
    }
  }

  std::string Marker(const std::string& column) {
    return RawQuery(db_, "SELECT " + column + " FROM integrity_marker WHERE id = 1");
  }

  TempDir dir_;
  std::string db_;
  AuditOptions options_;
  std::unique_ptr<AuditLog> log_;
};

TEST_F(IntegrityTest, FreshLogPassesAndIsMarked) {
  VerifyReport rep = Check(*log_, IntegrityCheck::kIncremental);
  EXPECT_TRUE(rep.ok) << rep.problem;
  EXPECT_EQ(rep.kind, IntegrityCheck::kFull);  // no marker yet: a full check
  EXPECT_EQ(rep.events, 0u);
  EXPECT_EQ(Marker("verified_seq"), "0");
  rep = Check(*log_, IntegrityCheck::kIncremental);
  EXPECT_TRUE(rep.ok) << rep.problem;
  EXPECT_EQ(rep.kind, IntegrityCheck::kIncremental);
}

TEST_F(IntegrityTest, IncrementalCheckReadsOnlyTheNewEvents) {
  BulkAppend(db_, 2500);  // 5,000 events
  VerifyReport rep = Check(*log_, IntegrityCheck::kFull);
  ASSERT_TRUE(rep.ok) << rep.problem;
  EXPECT_EQ(rep.events, 5000u);
  EXPECT_EQ(Marker("verified_seq"), "5000");
  EXPECT_EQ(Marker("verified_hash"), rep.head_hash);
  const std::string full_ns = Marker("full_ns");

  AppendRuns(2, "new");
  rep = Check(*log_, IntegrityCheck::kIncremental);
  ASSERT_TRUE(rep.ok) << rep.problem;
  EXPECT_EQ(rep.kind, IntegrityCheck::kIncremental);
  EXPECT_EQ(rep.events, 4u);
  EXPECT_EQ(rep.head_seq, 5004);
  EXPECT_EQ(Marker("verified_seq"), "5004");
  EXPECT_EQ(Marker("full_ns"), full_ns);  // an incremental check is not a full one

  rep = Check(*log_, IntegrityCheck::kIncremental);
  ASSERT_TRUE(rep.ok) << rep.problem;
  EXPECT_EQ(rep.events, 0u);
  // The marker is outside the chain: the auditors' verify still agrees.
  auto verified = log_->Verify();
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok) << verified->problem;
  EXPECT_EQ(verified->events, 5004u);
}

TEST_F(IntegrityTest, OldOrMissingFullCheckMakesTheIncrementalCheckFull) {
  AppendRuns(2, "a");
  ASSERT_TRUE(Check(*log_, IntegrityCheck::kFull).ok);
  AppendRuns(1, "b");
  // The last full check was long ago.
  ASSERT_EQ(RawSql(db_, "UPDATE integrity_marker SET full_ns = 1000"), "");
  VerifyReport rep = Check(*log_, IntegrityCheck::kIncremental, std::chrono::hours(1));
  EXPECT_TRUE(rep.ok) << rep.problem;
  EXPECT_EQ(rep.kind, IntegrityCheck::kFull);
  EXPECT_EQ(rep.events, 6u);
  EXPECT_NE(Marker("full_ns"), "1000");
  // One in the future has an unknown age.
  ASSERT_EQ(RawSql(db_, "UPDATE integrity_marker SET full_ns = 9000000000000000000"), "");
  EXPECT_EQ(Check(*log_, IntegrityCheck::kIncremental).kind, IntegrityCheck::kFull);
  // max_full_age 0: always full.
  EXPECT_EQ(Check(*log_, IntegrityCheck::kIncremental, std::chrono::seconds(0)).kind,
            IntegrityCheck::kFull);
  EXPECT_EQ(Check(*log_, IntegrityCheck::kIncremental).kind, IntegrityCheck::kIncremental);
}

TEST_F(IntegrityTest, MissingOrMalformedMarkerMeansAFullCheck) {
  AppendRuns(2, "a");
  ASSERT_TRUE(Check(*log_, IntegrityCheck::kFull).ok);
  for (const char* sql : {
           "DELETE FROM integrity_marker",
           "UPDATE integrity_marker SET verified_hash = 'not hex'",
           "UPDATE integrity_marker SET log_id = 'another log'",
           "UPDATE integrity_marker SET verified_seq = -4",
       }) {
    ASSERT_EQ(RawSql(db_, sql), "") << sql;
    VerifyReport rep = Check(*log_, IntegrityCheck::kIncremental);
    EXPECT_TRUE(rep.ok) << sql << ": " << rep.problem;
    EXPECT_EQ(rep.kind, IntegrityCheck::kFull) << sql;
    // ...which writes a good marker again.
    EXPECT_EQ(Marker("verified_seq"), "4") << sql;
    EXPECT_EQ(Check(*log_, IntegrityCheck::kIncremental).kind, IntegrityCheck::kIncremental);
  }
  // A dropped table is recreated by the next writer; readers take its absence as "no marker".
  ASSERT_EQ(RawSql(db_, "DROP TABLE integrity_marker"), "");
  AuditOptions ro;
  ro.read_only = true;
  auto reader = OpenOrDie(db_, ro);
  ASSERT_TRUE(reader);
  VerifyReport rep = Check(*reader, IntegrityCheck::kIncremental);
  EXPECT_TRUE(rep.ok) << rep.problem;
  EXPECT_EQ(rep.kind, IntegrityCheck::kFull);
  EXPECT_EQ(RawQuery(db_, "SELECT count(*) FROM sqlite_schema WHERE name = 'integrity_marker'"),
            "0");  // a reader writes nothing
  auto writer = OpenOrDie(db_, options_);
  ASSERT_TRUE(writer);
  EXPECT_TRUE(Check(*writer, IntegrityCheck::kIncremental).ok);
  EXPECT_EQ(Marker("verified_seq"), "4");
}

TEST_F(IntegrityTest, EditedNewEventFailsTheIncrementalCheck) {
  AppendRuns(3, "a");
  ASSERT_TRUE(Check(*log_, IntegrityCheck::kFull).ok);
  AppendRuns(3, "b");  // events 7..12
  ASSERT_EQ(RawSql(db_,
                   "DROP TRIGGER events_no_update; "
                   "UPDATE events SET verdict = 'timeout', exit_code = 124 WHERE seq = 10"),
            "");
  VerifyReport rep = Check(*log_, IntegrityCheck::kIncremental);
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.kind, IntegrityCheck::kIncremental);
  EXPECT_EQ(rep.first_bad_seq, 10);
  EXPECT_NE(rep.problem.find("hash mismatch"), std::string::npos) << rep.problem;
  // A failed check does not move the marker.
  EXPECT_EQ(Marker("verified_seq"), "6");
  // Nor does it sign anything.
  auto cp = log_->MakeCheckpoint();
  EXPECT_EQ(cp.status().code(), Status::Code::kDataLoss);
  EXPECT_NE(cp.status().message().find("refusing to sign"), std::string::npos)
      << cp.status().message();
  EXPECT_NE(cp.status().message().find("first bad event: 10"), std::string::npos)
      << cp.status().message();
  EXPECT_EQ(RawQuery(db_, "SELECT count(*) FROM checkpoints"), "0");
  EXPECT_NE(access(options_.key_path.c_str(), F_OK), 0) << "a key was made for a damaged log";
}

TEST_F(IntegrityTest, EditedOldEventIsFoundByTheFullCheck) {
  AppendRuns(3, "a");
  ASSERT_TRUE(Check(*log_, IntegrityCheck::kFull).ok);
  ASSERT_EQ(RawSql(db_,
                   "DROP TRIGGER events_no_update; "
                   "UPDATE events SET argv = '[\"innocent\"]' WHERE seq = 2"),
            "");
  AppendRuns(1, "b");
  VerifyReport rep = Check(*log_, IntegrityCheck::kFull);
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.first_bad_seq, 2);
  // The incremental check reaches it once the full check is due.
  ASSERT_EQ(RawSql(db_, "UPDATE integrity_marker SET full_ns = 1000"), "");
  rep = Check(*log_, IntegrityCheck::kIncremental, std::chrono::hours(1));
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.kind, IntegrityCheck::kFull);
  EXPECT_EQ(rep.first_bad_seq, 2);
}

TEST_F(IntegrityTest, MarkerThatLiesFailsTheCheck) {
  AppendRuns(3, "a");
  ASSERT_TRUE(Check(*log_, IntegrityCheck::kFull).ok);
  AppendRuns(1, "b");
  const std::string good_hash = Marker("verified_hash");
  // A well-formed hash the chain does not have at that event.
  ASSERT_EQ(
      RawSql(db_, "UPDATE integrity_marker SET verified_hash = '" + std::string(64, 'a') + "'"),
      "");
  for (IntegrityCheck kind : {IntegrityCheck::kIncremental, IntegrityCheck::kFull}) {
    VerifyReport rep = Check(*log_, kind);
    EXPECT_FALSE(rep.ok);
    EXPECT_EQ(rep.first_bad_seq, 6);
    EXPECT_NE(rep.problem.find("integrity marker"), std::string::npos) << rep.problem;
    EXPECT_NE(rep.problem.find("rewritten"), std::string::npos) << rep.problem;
  }
  auto verified = log_->Verify();
  ASSERT_TRUE(verified.ok());
  EXPECT_FALSE(verified->ok);
  EXPECT_FALSE(log_->MakeCheckpoint().ok());
  // An event the log does not have (as after a truncation).
  ASSERT_EQ(RawSql(db_, "UPDATE integrity_marker SET verified_seq = 50, verified_hash = '" +
                            good_hash + "'"),
            "");
  for (IntegrityCheck kind : {IntegrityCheck::kIncremental, IntegrityCheck::kFull}) {
    VerifyReport rep = Check(*log_, kind);
    EXPECT_FALSE(rep.ok);
    EXPECT_NE(rep.problem.find("truncated"), std::string::npos) << rep.problem;
  }
  // Back to the truth: the log verifies again.
  ASSERT_EQ(RawSql(db_, "UPDATE integrity_marker SET verified_seq = 6"), "");
  EXPECT_TRUE(Check(*log_, IntegrityCheck::kIncremental).ok);
}

TEST_F(IntegrityTest, TruncationBelowTheMarkerFailsTheIncrementalCheck) {
  AppendRuns(4, "a");
  ASSERT_TRUE(Check(*log_, IntegrityCheck::kFull).ok);
  ASSERT_EQ(RawSql(db_, "DROP TRIGGER events_no_delete; DELETE FROM events WHERE seq > 5"), "");
  VerifyReport rep = Check(*log_, IntegrityCheck::kIncremental);
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.problem.find("truncated"), std::string::npos) << rep.problem;
}

TEST_F(IntegrityTest, ReadOnlyCheckDoesNotWriteTheMarker) {
  AppendRuns(2, "a");
  ASSERT_TRUE(Check(*log_, IntegrityCheck::kFull).ok);
  AppendRuns(1, "b");
  AuditOptions ro;
  ro.read_only = true;
  auto reader = OpenOrDie(db_, ro);
  ASSERT_TRUE(reader);
  VerifyReport rep = Check(*reader, IntegrityCheck::kIncremental);
  EXPECT_TRUE(rep.ok) << rep.problem;
  EXPECT_EQ(rep.events, 2u);
  EXPECT_EQ(Marker("verified_seq"), "4");
}

TEST_F(IntegrityTest, CorruptInteriorPageFailsTheFullCheckAndIsNotSigned) {
  BulkAppend(db_, 4000);  // 8,000 events: a table b-tree with several interior pages
  ASSERT_TRUE(log_->MakeCheckpoint().ok());
  log_.reset();
  ASSERT_EQ(RawSql(db_, "PRAGMA wal_checkpoint(TRUNCATE)"), "");
  std::vector<int64_t> interior = InteriorTablePages(db_);
  ASSERT_GE(interior.size(), 2u);
  OverwritePageWithRandomBytes(db_, interior[interior.size() / 2]);

  log_ = OpenOrDie(db_, options_);  // Open reads too little to notice
  ASSERT_TRUE(log_);
  VerifyReport rep = Check(*log_, IntegrityCheck::kFull);
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.problem.find("integrity_check"), std::string::npos) << rep.problem;
  // The run path's check, once a full check is due.
  EXPECT_FALSE(Check(*log_, IntegrityCheck::kIncremental, std::chrono::seconds(0)).ok);
  auto cp = log_->MakeCheckpoint();
  EXPECT_EQ(cp.status().code(), Status::Code::kDataLoss) << cp.status().message();
  EXPECT_NE(cp.status().message().find("refusing to sign"), std::string::npos)
      << cp.status().message();
  EXPECT_EQ(RawQuery(db_, "SELECT count(*) FROM checkpoints"), "1");  // only the one before
}

TEST_F(IntegrityTest, CheckpointSignsWhatWasVerified) {
  AppendRuns(2, "a");
  auto cp = log_->MakeCheckpoint();
  ASSERT_TRUE(cp.ok()) << cp.status().message();
  EXPECT_EQ(cp->event_count, 4u);
  EXPECT_EQ(Marker("verified_seq"), "4");  // the full check it made marks the log
  EXPECT_EQ(Marker("verified_hash"), cp->head_hash);
}

}  // namespace
}  // namespace safex::audit
