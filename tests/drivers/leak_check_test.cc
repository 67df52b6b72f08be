// The leak checker itself must be able to fail: each kind of leftover it promises to see is
// created, seen in the diff, removed, and then no longer seen. Root (cgroups, mounts).
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <gtest/gtest.h>

#include "common/subprocess.h"
#include "tests/support/leak_check.h"
#include "tests/support/test_support.h"

namespace safex::testing {
namespace {

bool Contains(const std::vector<std::string>& diff, const std::string& needle) {
  return std::any_of(diff.begin(), diff.end(),
                     [&](const std::string& d) { return d.find(needle) != std::string::npos; });
}

TEST(LeakCheckTest, SeesEachKindOfLeftoverAndItsRemoval) {
  SAFEX_REQUIRE_ROOT();
  LeakSnapshot before = LeakSnapshot::Take();
  const std::string id = std::to_string(getpid());

  std::string tmp = "/tmp/safex-leaktest-" + id;
  ASSERT_EQ(mkdir(tmp.c_str(), 0700), 0);
  std::string cg = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0
                       ? "/sys/fs/cgroup/safex/leaktest-" + id
                       : "/sys/fs/cgroup/pids/safex/leaktest-" + id;
  mkdir(cg.substr(0, cg.rfind('/')).c_str(), 0755);
  ASSERT_EQ(mkdir(cg.c_str(), 0755), 0);
  std::string state = "/run/safex/leaktest-" + id;
  mkdir("/run/safex", 0700);
  ASSERT_EQ(mkdir(state.c_str(), 0700), 0);
  ASSERT_EQ(mount("tmpfs", state.c_str(), "tmpfs", 0, "size=64k"), 0);
  SpawnOptions so;
  so.argv = {"/bin/sleep", "30"};
  auto child = Subprocess::Spawn(so);
  ASSERT_TRUE(child.ok());

  std::vector<std::string> diff = Diff(before, LeakSnapshot::Take());
  EXPECT_TRUE(Contains(diff, "tmp: " + tmp)) << JoinLines(diff);
  EXPECT_TRUE(Contains(diff, "cgroup: " + cg)) << JoinLines(diff);
  EXPECT_TRUE(Contains(diff, "state: " + state)) << JoinLines(diff);
  EXPECT_TRUE(Contains(diff, "mount: " + state)) << JoinLines(diff);
  EXPECT_TRUE(Contains(diff, "[child]")) << JoinLines(diff);

  child->KillAndWait();
  EXPECT_EQ(umount(state.c_str()), 0);
  EXPECT_EQ(rmdir(state.c_str()), 0);
  EXPECT_EQ(rmdir(cg.c_str()), 0);
  EXPECT_EQ(rmdir(tmp.c_str()), 0);
  std::vector<std::string> after = WaitForNoLeaks(before);
  EXPECT_TRUE(after.empty()) << JoinLines(after);
}

TEST(LeakCheckTest, DiffIsTheNewItemsOnly) {
  LeakSnapshot a, b;
  a.items = {"x", "y"};
  b.items = {"y", "z", "w"};
  EXPECT_EQ(Diff(a, b), (std::vector<std::string>{"w", "z"}));
  EXPECT_TRUE(Diff(b, b).empty());
}

}  // namespace
}  // namespace safex::testing
