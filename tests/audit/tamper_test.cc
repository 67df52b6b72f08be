// Tampering with a copy of a log -- editing, deleting, reordering, truncating, rewriting the whole
// chain -- is each detected by Verify, which names the first bad event.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "audit/audit_log.h"
#include "audit/canonical.h"
#include "tests/audit/audit_test_util.h"

namespace safex::audit {
namespace {

using testing::CopyDb;
using testing::RawSql;
using testing::SampleEnd;
using testing::SampleStart;
using testing::TempDir;

constexpr int kRuns = 20;  // 40 events

const char kDropTriggers[] =
    "DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete; "
    "DROP TRIGGER checkpoints_no_update; DROP TRIGGER checkpoints_no_delete; "
    "DROP TRIGGER meta_no_update; DROP TRIGGER meta_no_delete;";

class TamperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    original_ = dir_.File("original.db");
    auto log = AuditLog::Open(original_, testing::TestOptions(dir_));
    ASSERT_TRUE(log.ok()) << log.status().message();
    for (int i = 0; i < kRuns; ++i) {
      std::string id = "run-" + std::to_string(i);
      ASSERT_TRUE((*log)->RecordStart(SampleStart(id)).ok());
      ASSERT_TRUE((*log)->RecordEnd(SampleEnd(id, i % 3 ? Verdict::kOk : Verdict::kTimeout)).ok());
    }
    auto cp = (*log)->MakeCheckpoint();
    ASSERT_TRUE(cp.ok()) << cp.status().message();
    checkpoint_ = *cp;
    auto rep = (*log)->Verify();
    ASSERT_TRUE(rep.ok() && rep->ok);
  }

  // A tampered copy: `sql` runs on it with the append-only triggers dropped.
  std::string Tampered(const std::string& sql) {
    std::string copy = dir_.File("copy-" + std::to_string(copies_++) + ".db");
    CopyDb(original_, copy);
    EXPECT_EQ(RawSql(copy, kDropTriggers), "");
    if (!sql.empty()) {
      EXPECT_EQ(RawSql(copy, sql), "") << sql;
    }
    return copy;
  }

  VerifyReport VerifyCopy(const std::string& path, bool with_file = false) {
    AuditOptions ro;
    ro.read_only = true;
    auto log = AuditLog::Open(path, ro);
    EXPECT_TRUE(log.ok()) << log.status().message();
    if (!log.ok()) return {};
    VerifyOptions vo;
    if (with_file) vo.external = checkpoint_;
    auto rep = (*log)->Verify(vo);
    EXPECT_TRUE(rep.ok()) << rep.status().message();
    return rep.ok() ? *rep : VerifyReport{};
  }

  // Recomputes every hash from `from_seq` on, as an attacker with the code would.
  void RewriteChain(const std::string& path, int64_t from_seq) {
    AuditOptions ro;
    ro.read_only = true;
    std::vector<std::pair<int64_t, std::string>> fixes;
    {
      auto log = AuditLog::Open(path, ro);
      ASSERT_TRUE(log.ok());
      Sha256Digest prev = GenesisHash((*log)->log_id());
      ASSERT_TRUE((*log)
                      ->ForEachEvent([&](const EventRow& row) {
                        Sha256Digest h = ChainHash(prev, EncodeEvent(row));
                        if (row.seq() >= from_seq) fixes.emplace_back(row.seq(), ToHex(h));
                        prev = h;
                        return Status::Ok();
                      })
                      .ok());
    }
    std::string sql;
    for (const auto& [seq, hash] : fixes) {
      sql += "UPDATE events SET hash = '" + hash + "' WHERE seq = " + std::to_string(seq) + ";";
    }
    ASSERT_EQ(RawSql(path, sql), "");
  }

  TempDir dir_;
  std::string original_;
  Checkpoint checkpoint_;
  int copies_ = 0;
};

TEST_F(TamperTest, UntouchedCopyVerifies) {
  auto rep = VerifyCopy(Tampered(""), /*with_file=*/true);
  EXPECT_TRUE(rep.ok) << rep.problem;
  EXPECT_EQ(rep.events, 2u * kRuns);
  EXPECT_EQ(rep.checkpoints, 2u);
}

TEST_F(TamperTest, EditedFieldIsDetectedAtThatEvent) {
  auto rep = VerifyCopy(Tampered("UPDATE events SET argv = '[\"innocent\"]' WHERE seq = 7"));
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.first_bad_seq, 7);
  EXPECT_NE(rep.problem.find("hash mismatch"), std::string::npos) << rep.problem;
}

TEST_F(TamperTest, EditedVerdictIsDetected) {
  auto rep = VerifyCopy(Tampered("UPDATE events SET verdict = 'ok' WHERE seq = 2"));
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.first_bad_seq, 2);
}

TEST_F(TamperTest, EditedHashIsDetected) {
  auto rep = VerifyCopy(
      Tampered("UPDATE events SET hash = '" + std::string(64, '0') + "' WHERE seq = 30"));
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.first_bad_seq, 30);
}

TEST_F(TamperTest, DeletedEventIsDetected) {
  auto rep = VerifyCopy(Tampered("DELETE FROM events WHERE seq = 10"));
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.first_bad_seq, 11);
  EXPECT_NE(rep.problem.find("missing"), std::string::npos) << rep.problem;
}

TEST_F(TamperTest, DeletedAndRenumberedEventIsDetected) {
  // Remove event 10 and close the gap, so the sequence looks whole.
  auto rep = VerifyCopy(
      Tampered("DELETE FROM events WHERE seq = 10; UPDATE events SET seq = -seq WHERE seq > 10;"
               "UPDATE events SET seq = -seq - 1 WHERE seq < 0;"));
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.first_bad_seq, 10);
}

TEST_F(TamperTest, ReorderedEventsAreDetected) {
  auto rep =
      VerifyCopy(Tampered("UPDATE events SET seq = -5 WHERE seq = 5;"
                          "UPDATE events SET seq = 5 WHERE seq = 6;"
                          "UPDATE events SET seq = 6 WHERE seq = -5;"));
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.first_bad_seq, 5);
}

TEST_F(TamperTest, TruncatedEventsAreDetectedByTheStoredCheckpoint) {
  auto rep = VerifyCopy(Tampered("DELETE FROM events WHERE seq > 35"));
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.problem.find("truncated"), std::string::npos) << rep.problem;
}

TEST_F(TamperTest, TruncationThatAlsoRemovesCheckpointsIsDetectedByTheCheckpointFile) {
  // The integrity marker would tell too (next test); this attacker removes it as well.
  std::string copy = Tampered(
      "DELETE FROM events WHERE seq > 35; DELETE FROM checkpoints; DELETE FROM "
      "integrity_marker;");
  // Without the file, nothing inside the database can tell: that is what the file is for.
  EXPECT_TRUE(VerifyCopy(copy).ok);
  auto rep = VerifyCopy(copy, /*with_file=*/true);
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.problem.find("the checkpoint file"), std::string::npos) << rep.problem;
  EXPECT_NE(rep.problem.find("truncated"), std::string::npos) << rep.problem;
}

TEST_F(TamperTest, TruncationThatLeavesTheMarkerIsDetectedByIt) {
  std::string copy = Tampered("DELETE FROM events WHERE seq > 35; DELETE FROM checkpoints;");
  auto rep = VerifyCopy(copy);
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.problem.find("integrity marker"), std::string::npos) << rep.problem;
  EXPECT_NE(rep.problem.find("truncated"), std::string::npos) << rep.problem;
}

TEST_F(TamperTest, RewrittenChainIsDetectedByCheckpoints) {
  std::string copy = Tampered("UPDATE events SET exit_code = 0, verdict = 'ok' WHERE seq = 2");
  RewriteChain(copy, 2);
  // The chain itself is consistent again...
  std::string no_cp = dir_.File("no-cp.db");
  CopyDb(copy, no_cp);
  ASSERT_EQ(RawSql(no_cp, "DELETE FROM checkpoints"), "");
  // ...and its unsigned integrity marker says the hash of event 40 changed...
  auto by_marker = VerifyCopy(no_cp);
  EXPECT_FALSE(by_marker.ok);
  EXPECT_EQ(by_marker.first_bad_seq, 2 * kRuns);
  EXPECT_NE(by_marker.problem.find("integrity marker"), std::string::npos) << by_marker.problem;
  // ...which an attacker can delete too.
  ASSERT_EQ(RawSql(no_cp, "DELETE FROM integrity_marker"), "");
  EXPECT_TRUE(VerifyCopy(no_cp).ok);
  // ...but the signed checkpoints are not.
  auto rep = VerifyCopy(copy);
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.problem.find("rewritten"), std::string::npos) << rep.problem;
  rep = VerifyCopy(no_cp, /*with_file=*/true);
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.first_bad_seq, 2 * kRuns);
}

TEST_F(TamperTest, ForgedCheckpointIsDetected) {
  auto rep = VerifyCopy(Tampered("UPDATE checkpoints SET event_count = 10"));
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.problem.find("signature"), std::string::npos) << rep.problem;
}

TEST_F(TamperTest, EditedLogIdBreaksTheFirstEvent) {
  auto rep = VerifyCopy(Tampered("UPDATE meta SET value = 'ffff' WHERE key = 'log_id'"));
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.first_bad_seq, 1);
}

TEST_F(TamperTest, TruncatedFileIsDetected) {
  std::string copy = Tampered("");
  struct stat st {};
  ASSERT_EQ(stat(copy.c_str(), &st), 0);
  ASSERT_EQ(truncate(copy.c_str(), st.st_size / 2), 0);
  AuditOptions ro;
  ro.read_only = true;
  auto log = AuditLog::Open(copy, ro);
  if (!log.ok()) {
    EXPECT_EQ(log.status().code(), Status::Code::kDataLoss) << log.status().message();
    return;
  }
  auto rep = (*log)->Verify();
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_FALSE(rep->ok);
}

TEST_F(TamperTest, CheckpointOfAnotherLogIsRejected) {
  Checkpoint other = checkpoint_;
  other.log_id = std::string(32, 'e');
  AuditOptions ro;
  ro.read_only = true;
  auto log = AuditLog::Open(original_, ro);
  ASSERT_TRUE(log.ok());
  VerifyOptions vo;
  vo.external = other;
  auto rep = (*log)->Verify(vo);
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE(rep->ok);  // the signature covers the log id
}

}  // namespace
}  // namespace safex::audit
