// ResultOf (drivers/microvm/run_steps.h): what a run's result says, from the session with the
// guest alone. The wall-time kill keeps the guest's console, so that a guest that stalled (not the
// program) can be told from a program that ran too long.
#include <gtest/gtest.h>

#include <csignal>

#include "drivers/microvm/run_steps.h"

namespace safex::microvm {
namespace {

plan::Plan TenSecondPlan() {
  plan::Plan p;
  p.limits.wall_time_ns = 10'000'000'000ull;
  p.limits.output_bytes = 1 << 20;
  return p;
}

SessionResult KilledWhileRunning(std::string console) {
  SessionResult s;
  s.phase = Phase::kRunning;
  s.timed_out = true;
  s.t_started = std::chrono::seconds(2);
  s.t_end = std::chrono::seconds(12);
  s.console_tail = std::move(console);
  return s;
}

TEST(MicrovmResultTest, AWallTimeKillKeepsTheGuestConsoleForTheRecord) {
  drivers::RunResult r =
      ResultOf(TenSecondPlan(), KilledWhileRunning("rcu: INFO: rcu_preempt self-detected stall"),
               256, 0, "microvm/tcg");
  EXPECT_EQ(r.limit, drivers::LimitHit::kWallTime);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_EQ(r.wall_ns, 10'000'000'000ull);
  EXPECT_NE(r.backend_error.find("console at the kill: rcu: INFO: rcu_preempt self-detected stall"),
            std::string::npos)
      << r.backend_error;
  // The console is the operator's, never the program's output.
  EXPECT_TRUE(r.stdout_stream.data.empty());
  EXPECT_TRUE(r.stderr_stream.data.empty());
}

TEST(MicrovmResultTest, AWallTimeKillOfAQuietGuestAddsNothing) {
  drivers::RunResult r = ResultOf(TenSecondPlan(), KilledWhileRunning(""), 256, 0, "microvm/tcg");
  EXPECT_EQ(r.limit, drivers::LimitHit::kWallTime);
  EXPECT_EQ(r.backend_error, "");
}

TEST(MicrovmResultTest, AnExitReportIsTheResult) {
  SessionResult s;
  s.phase = Phase::kDone;
  s.t_started = std::chrono::seconds(2);
  s.t_exit = std::chrono::milliseconds(2100);
  s.outputs_complete = true;
  s.stdout_data = "hi\n";
  ExitReport e;
  e.exit_code = 3;
  e.stdout_total = 3;
  s.exit = e;
  s.console_tail = "some kernel line";
  drivers::RunResult r = ResultOf(TenSecondPlan(), s, 256, 0, "microvm/tcg");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.limit, drivers::LimitHit::kNone);
  EXPECT_EQ(r.wall_ns, 100'000'000ull);
  EXPECT_EQ(r.stdout_stream.data, "hi\n");
  EXPECT_EQ(r.backend_error, "");
}

}  // namespace
}  // namespace safex::microvm
