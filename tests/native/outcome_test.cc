// The native classifier: the program's end, the supervisor's stop, and the cgroup's counters.
#include "drivers/native/outcome.h"

#include <gtest/gtest.h>

#include <csignal>

#include "tests/drivers/test_plans.h"

namespace safex::drivers::native {
namespace {

ExitStatus Exited(int code) { return ExitStatus{true, code, 0}; }
ExitStatus Killed(int sig) { return ExitStatus{false, 0, sig}; }

TEST(NativeOutcomeTest, TheProgramsOwnEnd) {
  const plan::Limits lim = testing::BasePlan().limits;
  Observation o;
  o.exit = Exited(3);
  bool interrupted = true;
  ProgramEnd e = Classify(o, lim, &interrupted);
  EXPECT_FALSE(interrupted);
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_EQ(e.limit, LimitHit::kNone);
  o.exit = Killed(SIGSEGV);
  e = Classify(o, lim, &interrupted);
  EXPECT_EQ(e.term_signal, SIGSEGV);
  EXPECT_EQ(e.exit_code, -1);
}

TEST(NativeOutcomeTest, TheSupervisorsStopAndCancellationWin) {
  const plan::Limits lim = testing::BasePlan().limits;
  Observation o;
  o.exit = Killed(SIGKILL);
  o.stopped_for = LimitHit::kWallTime;
  o.stop_detail = "wall time limit: 20000 ms";
  bool interrupted = false;
  ProgramEnd e = Classify(o, lim, &interrupted);
  EXPECT_EQ(e.limit, LimitHit::kWallTime);
  EXPECT_EQ(e.term_signal, SIGKILL);
  o.cancelled = true;
  e = Classify(o, lim, &interrupted);
  EXPECT_TRUE(interrupted);
  EXPECT_EQ(e.limit, LimitHit::kNone);
}

TEST(NativeOutcomeTest, CountersNameTheLimit) {
  const plan::Limits lim = testing::BasePlan().limits;
  bool interrupted = false;
  Observation oom;
  oom.exit = Killed(SIGKILL);
  oom.counted.oom_kills = 1;
  EXPECT_EQ(Classify(oom, lim, &interrupted).limit, LimitHit::kMemory);

  Observation pids;
  pids.exit = Exited(0);
  pids.counted.pids_hits = 5;
  ProgramEnd e = Classify(pids, lim, &interrupted);
  EXPECT_EQ(e.limit, LimitHit::kPids);
  EXPECT_EQ(e.exit_code, 0);  // the program coped: its own status stands
  EXPECT_NE(e.limit_detail.find("exited normally"), std::string::npos) << e.limit_detail;

  Observation fsize;
  fsize.exit = Killed(SIGXFSZ);
  EXPECT_EQ(Classify(fsize, lim, &interrupted).limit, LimitHit::kDisk);

  Observation full;
  full.exit = Exited(1);
  full.counted.full_outputs = {{"/data/out", 4096}};
  EXPECT_EQ(Classify(full, lim, &interrupted).limit, LimitHit::kDisk);
  full.exit = Exited(0);  // a full mount behind a success is no limit
  EXPECT_EQ(Classify(full, lim, &interrupted).limit, LimitHit::kNone);
}

TEST(NativeOutcomeTest, TheCpuRlimitBackstopIsTheCpuLimit) {
  const plan::Limits lim = testing::BasePlan().limits;
  bool interrupted = false;
  Observation xcpu;
  xcpu.exit = Killed(SIGXCPU);
  EXPECT_EQ(Classify(xcpu, lim, &interrupted).limit, LimitHit::kCpuTime);
  Observation hard;
  hard.exit = Killed(SIGKILL);
  hard.cpu_ns = lim.cpu_time_ns + 1;
  EXPECT_EQ(Classify(hard, lim, &interrupted).limit, LimitHit::kCpuTime);
  hard.cpu_ns = 10;  // a SIGKILL from inside, with little CPU used: the program's own end
  EXPECT_EQ(Classify(hard, lim, &interrupted).limit, LimitHit::kNone);
}

}  // namespace
}  // namespace safex::drivers::native
