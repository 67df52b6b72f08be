// Host id leases: one id per live run, across processes; the range checked against the host's
// accounts.
#include "drivers/native/id_lease.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "tests/support/temp_dir.h"

namespace safex::drivers::native {
namespace {

using safex::testing::TempDir;

TEST(IdLeaseTest, LiveLeasesNeverShareAnIdAndAFreedOneIsTakenAgain) {
  TempDir t;
  const std::string dir = t.Join("ids");
  std::vector<IdLease> held;
  std::set<uint32_t> ids;
  for (int i = 0; i < 4; ++i) {
    auto l = IdLease::Acquire(dir, 5000, 4, "run-" + std::to_string(i % 2));
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_GE(l->id(), 5000u);
    EXPECT_LT(l->id(), 5004u);
    ids.insert(l->id());
    held.push_back(std::move(*l));
  }
  EXPECT_EQ(ids.size(), 4u);
  auto full = IdLease::Acquire(dir, 5000, 4, "run-x");
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), Status::Code::kUnavailable);
  const uint32_t freed = held[2].id();
  held.erase(held.begin() + 2);
  auto again = IdLease::Acquire(dir, 5000, 4, "run-y");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->id(), freed);
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(IdLeaseTest, AnotherProcessCannotTakeAHeldId) {
  TempDir t;
  const std::string dir = t.Join("ids");
  auto mine = IdLease::Acquire(dir, 7000, 1, "mine");
  ASSERT_TRUE(mine.ok());
  const pid_t pid = fork();
  if (pid == 0) {
    auto theirs = IdLease::Acquire(dir, 7000, 1, "theirs");
    _exit(theirs.ok() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a second process got the id";
}

TEST(IdLeaseTest, ADirectoryOthersCanWriteIsRefused) {
  TempDir t;
  const std::string dir = t.Join("ids");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  auto l = IdLease::Acquire(dir, 7000, 1, "r");
  EXPECT_FALSE(l.ok());
}

TEST(IdLeaseTest, AnAccountInsideTheRangeIsNamed) {
  TempDir t;
  const std::string passwd = t.Write("passwd",
                                     "root:x:0:0:root:/root:/bin/sh\n"
                                     "svc:x:1879048205:100::/:/bin/false\n");
  const std::string group = t.Write("group", "root:x:0:\nwheel:x:10:\n");
  Status in_range = CheckIdsUnassigned(1879048192, 65536, passwd, group);
  ASSERT_FALSE(in_range.ok());
  EXPECT_NE(in_range.message().find("svc"), std::string::npos) << in_range.message();
  EXPECT_TRUE(CheckIdsUnassigned(1879048192, 13, passwd, group).ok());
  const std::string group2 = t.Write("group2", "cache:x:1879048195:\n");
  EXPECT_FALSE(CheckIdsUnassigned(1879048192, 10, passwd, group2).ok());
  // The host's own databases: the default range holds no account on a machine of this kind.
  EXPECT_TRUE(CheckIdsUnassigned(0x70000000, 65536).ok());
}

}  // namespace
}  // namespace safex::drivers::native
