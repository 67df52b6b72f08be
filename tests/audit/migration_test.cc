// A log written by safex before schema version 2 (tests/audit/testdata/v1-log.db: two runs and a
// refusal by the `safex run` of commit 07d5102, then a signed checkpoint): readers read it as it
// is, the first writer migrates it in place, and every old event and checkpoint still verifies,
// before and after new events that use the version 2 columns.
#include <gtest/gtest.h>

#include <filesystem>

#include "audit/audit_log.h"
#include "tests/audit/audit_test_util.h"

namespace safex::audit {
namespace {

class MigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.path() + "/audit.db";
    std::filesystem::copy_file(std::string(SAFEX_AUDIT_TESTDATA) + "/v1-log.db", path_);
  }
  std::string UserVersion() { return testing::RawQuery(path_, "PRAGMA user_version"); }
  AuditOptions Writer() {
    AuditOptions o;
    o.key_path = dir_.path() + "/audit.key";
    return o;
  }

  testing::TempDir dir_;
  std::string path_;
};

TEST_F(MigrationTest, AReaderReadsAVersionOneLogAsItIs) {
  AuditOptions ro;
  ro.read_only = true;
  auto log = AuditLog::Open(path_, ro);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  auto runs = (*log)->ListRuns({});
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 3u);
  for (const RunSummary& r : *runs) EXPECT_EQ(r.purpose, "") << r.run_id;
  auto verified = (*log)->Verify({});
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  EXPECT_TRUE(verified->ok) << verified->problem;
  EXPECT_EQ(verified->checkpoints, 1u);
  EXPECT_EQ(UserVersion(), "1") << "a reader changes nothing";
}

TEST_F(MigrationTest, TheFirstWriterMigratesAndTheChainStillVerifies) {
  {
    auto log = AuditLog::Open(path_, Writer());
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ(UserVersion(), "4");
    auto before = (*log)->Verify({});
    ASSERT_TRUE(before.ok() && before->ok) << (before.ok() ? before->problem : "");
    EXPECT_EQ(before->checkpoints, 1u);

    RunStart start;
    start.run_id = "after-migration";
    start.policy_name = "p";
    start.backend = "gvisor";
    start.argv = {"/bin/true"};
    start.purpose = "test p/it runs";
    ASSERT_TRUE((*log)->RecordStart(start).ok());
    RunEnd end;
    end.run_id = "after-migration";
    end.verdict = Verdict::kOk;
    end.exit_code = 0;
    end.enforcement = R"({"runtime":"runsc"})";
    ASSERT_TRUE((*log)->RecordEnd(end).ok());
    ASSERT_TRUE((*log)->MakeCheckpoint().ok());
  }
  // A second writer finds nothing to migrate; readers see the new columns.
  auto log = AuditLog::Open(path_, Writer());
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  auto after = (*log)->Verify({});
  ASSERT_TRUE(after.ok() && after->ok) << (after.ok() ? after->problem : "");
  EXPECT_EQ(after->checkpoints, 2u);
  auto run = (*log)->GetRun("after-migration");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->run.purpose, "test p/it runs");
  EXPECT_EQ(run->run.enforcement, R"({"runtime":"runsc"})");
  auto runs = (*log)->ListRuns({});
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->size(), 4u);
  EXPECT_EQ(testing::RawQuery(path_, "SELECT count(*) FROM events WHERE purpose IS NOT NULL"), "1");
}

// A log of schema version 2 (tests/audit/testdata/v2-log.db: two runs written by the audit
// library of commit f232180, then a signed checkpoint): the first writer rebuilds the events
// table for the current version, every old event and the checkpoint still verify, and the new
// kind is accepted; the append-only triggers are back.
TEST(MigrationV2Test, TheEventsTableIsRebuiltAndEverythingStillVerifies) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/audit.db";
  std::filesystem::copy_file(std::string(SAFEX_AUDIT_TESTDATA) + "/v2-log.db", path);
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA user_version"), "2");
  AuditOptions o;
  o.key_path = dir.path() + "/audit.key";
  auto log = AuditLog::Open(path, o);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA user_version"), "4");
  auto before = (*log)->Verify({});
  ASSERT_TRUE(before.ok() && before->ok) << (before.ok() ? before->problem : "");
  EXPECT_EQ(before->events, 4u);
  EXPECT_EQ(before->checkpoints, 1u);
  Access a;
  a.run_id = "v2run-1";
  a.requester.uid = 0;
  a.what = "fetched file out.txt: 1 bytes, SHA-256 00";
  ASSERT_TRUE((*log)->RecordAccess(a).ok());
  ASSERT_TRUE((*log)->MakeCheckpoint().ok());
  auto after = (*log)->Verify({});
  ASSERT_TRUE(after.ok() && after->ok) << (after.ok() ? after->problem : "");
  EXPECT_EQ(after->events, 5u);
  EXPECT_EQ(testing::RawQuery(path, "SELECT count(*) FROM accesses"), "1");
  EXPECT_EQ(testing::RawQuery(path, "SELECT count(*) FROM runs"), "2");
  EXPECT_NE(testing::RawSql(path, "DELETE FROM events WHERE seq = 1"), "");  // still append-only
  EXPECT_EQ(testing::RawQuery(path, "SELECT count(*) FROM events"), "5");
}

// A log of schema version 3 (tests/audit/testdata/v3-log.db: two runs written by the audit
// library of commit 552843f, then a signed checkpoint): rebuilt for version 4 the same way; the
// old events and the checkpoint verify, and sandbox events are accepted.
TEST(MigrationV3Test, TheEventsTableIsRebuiltForSandboxEvents) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/audit.db";
  std::filesystem::copy_file(std::string(SAFEX_AUDIT_TESTDATA) + "/v3-log.db", path);
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA user_version"), "3");
  AuditOptions o;
  o.key_path = dir.path() + "/audit.key";
  auto log = AuditLog::Open(path, o);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA user_version"), "4");
  SandboxEvent made;
  made.sandbox_id = "sbx-after-migration";
  made.plan_digest = std::string(64, 'b');
  ASSERT_TRUE((*log)->RecordSandbox(made).ok());
  ASSERT_TRUE((*log)->MakeCheckpoint().ok());
  auto after = (*log)->Verify({});
  ASSERT_TRUE(after.ok() && after->ok) << (after.ok() ? after->problem : "");
  EXPECT_EQ(after->events, 5u);
  EXPECT_EQ(after->checkpoints, 2u);
  EXPECT_EQ(testing::RawQuery(path, "SELECT count(*) FROM sandboxes"), "1");
  EXPECT_EQ(testing::RawQuery(path, "SELECT count(*) FROM runs"), "2");
  EXPECT_NE(testing::RawSql(path, "DELETE FROM events WHERE seq = 1"), "");  // still append-only
}

}  // namespace
}  // namespace safex::audit
