// Crash recovery: a supervisor killed mid-run takes its sandbox with it (the parent-death signal
// ends the run's pid namespace), and leaves its directory, output mount and cgroup;
// CleanupStale removes exactly those and leaves a live run alone.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "common/subprocess.h"
#include "drivers/native/run_state.h"
#include "tests/native/native_test_fixture.h"

namespace safex::drivers::testing {
namespace {

using namespace std::chrono_literals;

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::string CgroupDir(const std::string& run_id) {
  for (const char* base : {"/sys/fs/cgroup/pids/safex/", "/sys/fs/cgroup/safex/"}) {
    const std::string d = base + native::CgroupName(run_id);
    if (Exists(d)) return d;
  }
  return "";
}

// Waits until the run's program runs (its cgroup has a member).
bool Started(const std::string& run_id) {
  for (int i = 0; i < 250; ++i) {
    const std::string d = CgroupDir(run_id);
    std::ifstream procs(d + "/cgroup.procs");
    std::string pid;
    if (!d.empty() && (procs >> pid)) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

Result<Subprocess> StartHelper(const std::string& run_id) {
  SpawnOptions so;
  so.argv = {SAFEX_NATIVE_RUN_HELPER, run_id, "/bin/sleep", "60"};
  return Subprocess::Spawn(so);
}

TEST_F(NativeTest, CleanupStaleRemovesACrashedRunAndSparesLiveOnes) {
  const std::string crashed = NextNativeRunId() + "-crash";
  const std::string live = NextNativeRunId() + "-live";
  auto c = StartHelper(crashed);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(Started(crashed)) << "the helper's run never started";
  c->KillAndWait();  // the "supervisor" dies mid-run

  // Its sandbox died with it; its directory and cgroup are left.
  const std::string cg = CgroupDir(crashed);
  ASSERT_FALSE(cg.empty());
  bool empty = false;
  for (int i = 0; i < 100 && !empty; ++i) {
    std::ifstream procs(cg + "/cgroup.procs");
    std::string pid;
    empty = !(procs >> pid);
    if (!empty) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(empty) << "the sandbox outlived its supervisor";
  EXPECT_TRUE(Exists("/run/safex/native/" + crashed));

  auto l = StartHelper(live);
  ASSERT_TRUE(l.ok());
  ASSERT_TRUE(Started(live));

  int cleaned = -1;
  Status s = driver_->CleanupStale(&cleaned);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(cleaned, 1);
  EXPECT_FALSE(Exists("/run/safex/native/" + crashed));
  EXPECT_TRUE(CgroupDir(crashed).empty());
  EXPECT_TRUE(Exists("/run/safex/native/" + live)) << "a live run was cleaned up";
  l->KillAndWait();
  // The live one's leftovers, once its owner is known dead, through the one-run path.
  bool removed = false;
  EXPECT_TRUE(driver_->CleanupStaleRun(live, &removed).ok());
  EXPECT_TRUE(removed);
  EXPECT_FALSE(Exists("/run/safex/native/" + live));
}

}  // namespace
}  // namespace safex::drivers::testing
