// Fail closed: when the log cannot be written -- unwritable directory, read-only file or file
// system, corrupt or foreign file, disk full, file removed -- Open/CheckWritable/Record* return a
// clear error (so the supervisor refuses the run with 125), and nothing half-written is left.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "audit/audit_log.h"
#include "tests/audit/audit_test_util.h"
#include "tests/support/test_support.h"

namespace safex::audit {
namespace {

using testing::SampleEnd;
using testing::SampleStart;
using testing::TempDir;

// A tmpfs mounted in this test process's own mount namespace (so nothing is visible to, or left
// behind for, anyone else); unmounted on destruction.
class ScopedTmpfs {
 public:
  ScopedTmpfs(const std::string& dir, const std::string& opts) : dir_(dir) {
    static bool unshared = false;
    if (!unshared) {
      // Security: a private mount namespace, so the mounts below never propagate to the host.
      if (unshare(CLONE_NEWNS) != 0 ||
          mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        return;
      }
      unshared = true;
    }
    mkdir(dir.c_str(), 0755);
    ok_ = mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) == 0;
  }
  ~ScopedTmpfs() {
    if (ok_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }
  bool RemountReadOnly() {
    return mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                 nullptr) == 0;
  }

 private:
  std::string dir_;
  bool ok_ = false;
};

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f << data;
}

TEST(FailClosedTest, UnwritableDirectory) {
  TempDir dir;
  const std::string ro_dir = dir.File("ro");
  std::unique_ptr<ScopedTmpfs> mnt;
  if (geteuid() == 0) {
    // Root ignores mode bits: use a read-only file system instead.
    mnt = std::make_unique<ScopedTmpfs>(ro_dir, "size=1m");
    ASSERT_TRUE(mnt->ok());
    ASSERT_TRUE(mnt->RemountReadOnly());
  } else {
    ASSERT_EQ(mkdir(ro_dir.c_str(), 0555), 0);
  }
  auto log = AuditLog::Open(ro_dir + "/audit.db", testing::TestOptions(dir));
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), Status::Code::kPermissionDenied) << log.status().message();
  EXPECT_NE(log.status().message().find(ro_dir + "/audit.db"), std::string::npos)
      << log.status().message();
}

TEST(FailClosedTest, ReadOnlyFileSystemUnderAnOpenLog) {
  SAFEX_REQUIRE_ROOT();
  TempDir dir;
  const std::string mnt_dir = dir.File("mnt");
  ScopedTmpfs mnt(mnt_dir, "size=4m");
  ASSERT_TRUE(mnt.ok());
  const std::string db = mnt_dir + "/audit.db";
  {
    auto log = AuditLog::Open(db, testing::TestOptions(dir));
    ASSERT_TRUE(log.ok()) << log.status().message();
    ASSERT_TRUE((*log)->RecordStart(SampleStart("before")).ok());
  }
  ASSERT_TRUE(mnt.RemountReadOnly());
  // A writer cannot open it...
  auto w = AuditLog::Open(db, testing::TestOptions(dir));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), Status::Code::kPermissionDenied) << w.status().message();
  // ...while an auditor still can (the -wal and -shm files were kept for this).
  AuditOptions ro;
  ro.read_only = true;
  auto r = AuditLog::Open(db, ro);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->ListRuns({})->size(), 1u);
  EXPECT_TRUE((*r)->Verify()->ok);
}

TEST(FailClosedTest, ReadOnlyFileForNonRoot) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  {
    auto log = AuditLog::Open(db, testing::TestOptions(dir));
    ASSERT_TRUE(log.ok());
  }
  ASSERT_EQ(chmod(db.c_str(), 0444), 0);
  if (geteuid() != 0) {
    auto log = AuditLog::Open(db, testing::TestOptions(dir));
    ASSERT_FALSE(log.ok());
    EXPECT_EQ(log.status().code(), Status::Code::kPermissionDenied) << log.status().message();
    return;
  }
  // Root ignores file modes, so the open is tried by a child that has become `nobody`: the
  // directory is world-writable (sticky, like /tmp), so only the file's own mode stands in the way.
  ASSERT_EQ(chmod(dir.path().c_str(), 01777), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      _exit(3);
    }
    auto log = AuditLog::Open(db, testing::TestOptions(dir));
    if (log.ok()) _exit(1);
    _exit(log.status().code() == Status::Code::kPermissionDenied ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: opened a read-only file for writing; 2: wrong error code; 3: could not drop to nobody";
}

TEST(FailClosedTest, GarbageFileIsRefusedAsCorrupt) {
  TempDir dir;
  std::mt19937_64 rng(1);
  std::string garbage(64 * 1024, '\0');
  for (auto& c : garbage) c = static_cast<char>(rng());
  for (const std::string& content : {garbage, std::string("hello, I am a text file\n")}) {
    const std::string db = dir.File("garbage.db");
    WriteFile(db, content);
    auto log = AuditLog::Open(db, testing::TestOptions(dir));
    ASSERT_FALSE(log.ok());
    EXPECT_EQ(log.status().code(), Status::Code::kDataLoss) << log.status().message();
    EXPECT_NE(log.status().message().find("corrupt"), std::string::npos) << log.status().message();
    AuditOptions ro;
    ro.read_only = true;
    EXPECT_EQ(AuditLog::Open(db, ro).status().code(), Status::Code::kDataLoss);
  }
}

TEST(FailClosedTest, SqliteHeaderWithGarbagePagesIsRefused) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  {
    auto log = AuditLog::Open(db, testing::TestOptions(dir));
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE((*log)->RecordStart(SampleStart("r" + std::to_string(i))).ok());
    }
  }
  testing::CopyDb(db, dir.File("copy.db"));
  const std::string copy = dir.File("copy.db");
  // Keep the 100-byte header, overwrite the schema page and beyond with junk.
  std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(100);
  std::string junk(8192, '\xA5');
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  f.close();
  auto log = AuditLog::Open(copy, testing::TestOptions(dir));
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), Status::Code::kDataLoss) << log.status().message();
}

TEST(FailClosedTest, ForeignDatabaseIsNotTouched) {
  TempDir dir;
  const std::string db = dir.File("other.db");
  ASSERT_EQ(testing::RawSql(db, ""), "unable to open database file");  // does not exist yet
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE invoices (id INTEGER)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  auto log = AuditLog::Open(db, testing::TestOptions(dir));
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), Status::Code::kFailedPrecondition) << log.status().message();
  EXPECT_EQ(testing::RawQuery(db, "SELECT count(*) FROM sqlite_schema"), "1");  // untouched

  ASSERT_EQ(testing::RawSql(db, "PRAGMA application_id = 42"), "");
  EXPECT_EQ(AuditLog::Open(db, testing::TestOptions(dir)).status().code(),
            Status::Code::kFailedPrecondition);
}

TEST(FailClosedTest, UnknownSchemaVersionIsRefused) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  { ASSERT_TRUE(AuditLog::Open(db, testing::TestOptions(dir)).ok()); }
  ASSERT_EQ(testing::RawSql(db, "PRAGMA user_version = 99"), "");
  auto log = AuditLog::Open(db, testing::TestOptions(dir));
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(log.status().message().find("schema version 99"), std::string::npos);
}

TEST(FailClosedTest, SizeCapFullRefusesAppendsAndKeepsTheLogIntact) {
  TempDir dir;
  AuditOptions o = testing::TestOptions(dir);
  o.max_db_bytes = 96 * 1024;
  auto log = AuditLog::Open(dir.File("audit.db"), o);
  ASSERT_TRUE(log.ok()) << log.status().message();
  int appended = 0;
  Status st;
  for (int i = 0; i < 100000; ++i) {
    st = (*log)->RecordStart(SampleStart("r" + std::to_string(i)));
    if (!st.ok()) break;
    ++appended;
  }
  ASSERT_FALSE(st.ok()) << "the cap never fired";
  std::printf("size cap reached after %d events: %s\n", appended, st.message().c_str());
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted) << st.message();
  EXPECT_NE(st.message().find("full"), std::string::npos) << st.message();
  EXPECT_GT(appended, 10);
  // Nothing half-written; the next append fails the same way.
  EXPECT_EQ(*(*log)->EventCount(), static_cast<uint64_t>(appended));
  EXPECT_TRUE((*log)->Verify()->ok);
  EXPECT_EQ((*log)->RecordStart(SampleStart("again")).code(), Status::Code::kResourceExhausted);
}

TEST(FailClosedTest, FullDiskRefusesAppendsAndCheckWritable) {
  SAFEX_REQUIRE_ROOT();
  TempDir dir;
  const std::string mnt_dir = dir.File("mnt");
  ScopedTmpfs mnt(mnt_dir, "size=256k");
  ASSERT_TRUE(mnt.ok());
  AuditOptions o = testing::TestOptions(dir);
  o.min_free_bytes = 64 * 1024;
  auto log = AuditLog::Open(mnt_dir + "/audit.db", o);
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_TRUE((*log)->CheckWritable().ok());
  int appended = 0;
  Status st;
  for (int i = 0; i < 100000; ++i) {
    st = (*log)->RecordStart(SampleStart("r" + std::to_string(i)));
    if (!st.ok()) break;
    ++appended;
  }
  ASSERT_FALSE(st.ok()) << "the disk never filled";
  std::printf("disk full after %d events: %s\n", appended, st.message().c_str());
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted) << st.message();
  Status cw = (*log)->CheckWritable();
  EXPECT_EQ(cw.code(), Status::Code::kResourceExhausted) << cw.message();
  EXPECT_EQ(*(*log)->EventCount(), static_cast<uint64_t>(appended));
  auto rep = (*log)->Verify();
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_TRUE(rep->ok) << rep->problem;
}

TEST(FailClosedTest, RemovedOrReplacedFileIsNoticed) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  auto log = AuditLog::Open(db, testing::TestOptions(dir));
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->CheckWritable().ok());
  ASSERT_EQ(rename(db.c_str(), dir.File("moved.db").c_str()), 0);
  EXPECT_FALSE((*log)->CheckWritable().ok());
  WriteFile(db, "");
  Status st = (*log)->CheckWritable();
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.message();
  EXPECT_NE(st.message().find("replaced"), std::string::npos);
}

TEST(FailClosedTest, SymlinkAndBadParentAreRefused) {
  TempDir dir;
  ASSERT_EQ(symlink(dir.File("elsewhere.db").c_str(), dir.File("link.db").c_str()), 0);
  EXPECT_FALSE(AuditLog::Open(dir.File("link.db"), testing::TestOptions(dir)).ok());
  WriteFile(dir.File("plainfile"), "x");
  auto log = AuditLog::Open(dir.File("plainfile/audit.db"), testing::TestOptions(dir));
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("plainfile"), std::string::npos);
  EXPECT_FALSE(AuditLog::Open("", testing::TestOptions(dir)).ok());
}

}  // namespace
}  // namespace safex::audit
