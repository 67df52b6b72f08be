// Crash recovery: a supervisor killed mid-run leaves runsc state, cgroups, an output mount and its
// private directory; CleanupStale removes exactly those and leaves live runs alone.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "common/subprocess.h"
#include "tests/drivers/gvisor_test_fixture.h"

namespace safex::drivers::testing {
namespace {

using namespace std::chrono_literals;

bool HasStateFile(const std::string& run_id) {
  std::string dir = "/run/safex/" + run_id + "/state";
  for (int i = 0; i < 200; ++i) {
    std::string probe = dir + "/" + run_id + "_sandbox:" + run_id + ".state";
    if (access(probe.c_str(), F_OK) == 0) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

Result<Subprocess> StartHelper(const std::string& run_id) {
  SpawnOptions so;
  so.argv = {SAFEX_RUN_HELPER, run_id, "/bin/sleep", "60"};
  return Subprocess::Spawn(so);
}

TEST_F(GvisorTest, CleanupStaleRemovesACrashedRunAndSparesLiveOnes) {
  std::string crashed = NextRunId() + "-crash";
  std::string live = NextRunId() + "-live";
  auto c = StartHelper(crashed);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(HasStateFile(crashed)) << "the helper's run never started";
  c->KillAndWait();  // the "supervisor" dies mid-run

  // What a crash leaves: the run's directory (with its output tmpfs) and cgroups.
  std::this_thread::sleep_for(300ms);
  struct stat st;
  EXPECT_EQ(stat(("/run/safex/" + crashed).c_str(), &st), 0);
  EXPECT_EQ(stat(("/sys/fs/cgroup/pids/safex/" + crashed).c_str(), &st) == 0 ||
                stat(("/sys/fs/cgroup/safex/" + crashed).c_str(), &st) == 0,
            true);

  auto l = StartHelper(live);
  ASSERT_TRUE(l.ok());
  ASSERT_TRUE(HasStateFile(live));

  int cleaned = -1;
  Status s = driver_->CleanupStale(&cleaned);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(cleaned, 1);
  EXPECT_NE(access(("/run/safex/" + crashed).c_str(), F_OK), 0);
  EXPECT_EQ(access(("/run/safex/" + live).c_str(), F_OK), 0) << "a live run was cleaned up";

  // The live one ends normally when its owner stops it; then nothing of either is left.
  l->Signal(SIGTERM).ok();
  l->Wait(Subprocess::Clock::now() + 20s).ok();
  l->KillAndWait();
  Status s2 = driver_->CleanupStale(&cleaned);
  EXPECT_TRUE(s2.ok()) << s2.ToString();
}

}  // namespace
}  // namespace safex::drivers::testing
