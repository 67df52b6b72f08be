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
    EXPECT_EQ(UserVersion(), "5");
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
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA user_version"), "5");
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
// library of commit 552843f, then a signed checkpoint): rebuilt for the current version the same
// way; the old events and the checkpoint verify, and sandbox events are accepted.
TEST(MigrationV3Test, TheEventsTableIsRebuiltForSandboxEvents) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/audit.db";
  std::filesystem::copy_file(std::string(SAFEX_AUDIT_TESTDATA) + "/v3-log.db", path);
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA user_version"), "3");
  AuditOptions o;
  o.key_path = dir.path() + "/audit.key";
  auto log = AuditLog::Open(path, o);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA user_version"), "5");
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

// A log of schema version 4 (tests/audit/testdata/v4-log.db, written by the audit library of
// commit 8139dcb: two pooled sandboxes made, one serving a run and one evicted, two runs (one a
// policy's test), an access and a refusal, then a signed checkpoint): rebuilt for version 5 the
// same way. The old events and the checkpoint verify, the older views still read them, a session
// with an exec run and files is accepted and verifies with them, and the table is append-only.
TEST(MigrationV4Test, TheEventsTableIsRebuiltForSessions) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/audit.db";
  std::filesystem::copy_file(std::string(SAFEX_AUDIT_TESTDATA) + "/v4-log.db", path);
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA user_version"), "4");
  AuditOptions o;
  o.key_path = dir.path() + "/audit.key";
  auto log = AuditLog::Open(path, o);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA user_version"), "5");
  EXPECT_NE(testing::RawQuery(path, "SELECT value FROM meta WHERE key = 'migrated_to_5_ns'"), "");
  auto before = (*log)->Verify({});
  ASSERT_TRUE(before.ok() && before->ok) << (before.ok() ? before->problem : "");
  EXPECT_EQ(before->events, 9u);
  EXPECT_EQ(before->checkpoints, 1u);
  EXPECT_EQ(testing::RawQuery(path, "SELECT count(*) FROM runs"), "3");
  EXPECT_EQ(
      testing::RawQuery(path, "SELECT served_run FROM sandboxes WHERE sandbox_id = 'v4sbx-0'"),
      "v4run-0");
  EXPECT_EQ(testing::RawQuery(path, "SELECT count(*) FROM accesses"), "1");
  EXPECT_EQ(testing::RawQuery(path, "SELECT count(*) FROM runs WHERE session_id IS NOT NULL"), "0");

  SessionEvent opened;
  opened.session_id = "sess-after-migration";
  opened.requester = {1000, 1000, 4242};
  opened.plan_digest = std::string(64, 'b');
  ASSERT_TRUE((*log)->RecordSession(opened).ok());
  RunStart exec = testing::SampleStart("exec-after-migration");
  exec.purpose = SessionExecPurpose("sess-after-migration", 1);
  ASSERT_TRUE((*log)->RecordStart(exec).ok());
  ASSERT_TRUE((*log)->RecordEnd(testing::SampleEnd("exec-after-migration")).ok());
  SessionEvent file = opened;
  file.what = SessionEvent::What::kFileOut;
  file.reason = "out/result.json";
  file.file_bytes = 2;
  file.file_sha256 = std::string(64, 'e');
  ASSERT_TRUE((*log)->RecordSession(file).ok());
  ASSERT_TRUE((*log)->MakeCheckpoint().ok());
  auto after = (*log)->Verify({});
  ASSERT_TRUE(after.ok() && after->ok) << (after.ok() ? after->problem : "");
  EXPECT_EQ(after->events, 13u);
  EXPECT_EQ(after->checkpoints, 2u);
  EXPECT_EQ(testing::RawQuery(path,
                              "SELECT session_id || ' ' || execs || ' ' || files_out || ' ' "
                              "|| ifnull(closed_ns, 'open') FROM sessions"),
            "sess-after-migration 1 1 open");
  EXPECT_EQ(testing::RawQuery(path, "SELECT path || ' ' || bytes FROM session_files"),
            "out/result.json 2");
  EXPECT_EQ(testing::RawQuery(path,
                              "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND "
                              "name = 'events_start_purpose'"),
            "1");
  EXPECT_NE(testing::RawSql(path, "DELETE FROM events WHERE seq = 1"), "");  // still append-only
  EXPECT_NE(testing::RawSql(path, "UPDATE events SET uid = 1 WHERE seq = 10"), "");
}

}  // namespace
}  // namespace safex::audit
