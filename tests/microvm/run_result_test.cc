// ResultOf (drivers/microvm/run_steps.h): what a run's result says, from the session with the
// guest alone. The wall-time kill keeps the agent's heartbeats and the guest's console, so that a
// guest that stalled (not the program) can be told from a program that ran too long.
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

// A run whose program exited on its own `exit_ms` after the session's start, its outputs in.
SessionResult EndedRun(int64_t exit_ms, int32_t exit_code) {
  SessionResult s;
  s.phase = Phase::kDone;
  s.t_started = std::chrono::seconds(2);
  s.t_exit = std::chrono::milliseconds(exit_ms);
  s.outputs_complete = true;
  s.exit = ExitReport{};
  s.exit->exit_code = exit_code;
  return s;
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

// Too short a run to expect a heartbeat, and a quiet console: nothing to add.
TEST(MicrovmResultTest, AShortWallTimeKillOfAQuietGuestAddsNothing) {
  SessionResult s = KilledWhileRunning("");
  s.t_end = s.t_started + std::chrono::milliseconds(1500);
  drivers::RunResult r = ResultOf(TenSecondPlan(), s, 256, 0, "microvm/tcg");
  EXPECT_EQ(r.limit, drivers::LimitHit::kWallTime);
  EXPECT_EQ(r.backend_error, "");
}

HeartbeatSeen Beat(uint64_t guest_s, uint64_t cpu_ms, std::string state, int64_t host_ms) {
  return {Heartbeat{guest_s * 1'000'000'000ull, cpu_ms * 1'000'000ull, false, std::move(state)},
          std::chrono::milliseconds(host_ms)};
}

// A program that ran to its deadline: the guest beat to the end, its clock kept pace, and the
// record has the program's state and the CPU time it had used (not 0).
TEST(MicrovmResultTest, AWallTimeKillSaysWhatTheHeartbeatsSaid) {
  SessionResult s = KilledWhileRunning("");
  s.first_heartbeat = Beat(5, 900, "R", 3000);
  s.last_heartbeat = Beat(13, 8900, "R", 11600);
  s.heartbeats = 9;
  drivers::RunResult r = ResultOf(TenSecondPlan(), s, 256, 0, "microvm/tcg");
  EXPECT_EQ(r.limit, drivers::LimitHit::kWallTime);
  EXPECT_EQ(r.cpu_ns, 8'900'000'000ull);
  EXPECT_EQ(r.backend_error,
            "9 heartbeats, the last 400 ms before the kill: program R, CPU 8900 ms; guest clock "
            "8000 ms over 8600 ms of host time between the first and the last");
}

// A guest that stopped: its last heartbeat came long before the kill.
TEST(MicrovmResultTest, AGuestThatFellSilentIsToldApart) {
  SessionResult s = KilledWhileRunning("");
  s.first_heartbeat = Beat(5, 1, "S do_wait", 3000);
  s.last_heartbeat = s.first_heartbeat;
  s.heartbeats = 1;
  drivers::RunResult r = ResultOf(TenSecondPlan(), s, 256, 0, "microvm/tcg");
  EXPECT_EQ(r.backend_error,
            "the guest fell silent: 1 heartbeat, the last 9000 ms before the kill: program "
            "S do_wait, CPU 1 ms");
}

TEST(MicrovmResultTest, NoHeartbeatInTenSecondsIsAStalledGuest) {
  SessionResult s = KilledWhileRunning("");
  s.nudges = 4;
  drivers::RunResult r = ResultOf(TenSecondPlan(), s, 256, 0, "microvm/tcg");
  EXPECT_EQ(r.cpu_ns, 0u);
  EXPECT_EQ(r.backend_error,
            "no heartbeat from the guest in the 10000 ms after the program started (the agent "
            "sends one a second: the guest stalled); nudged 4 times");
}

// A run that ended on its own after its guest went quiet for seconds, or was nudged at all: the
// record says so (the verdict is the program's).
TEST(MicrovmResultTest, ALongSilenceInARunThatEndedIsNoted) {
  SessionResult s = EndedRun(8000, 0);
  s.longest_silence = std::chrono::milliseconds(4200);
  s.nudges = 2;
  drivers::RunResult r = ResultOf(TenSecondPlan(), s, 256, 0, "microvm/tcg");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.limit, drivers::LimitHit::kNone);
  EXPECT_EQ(r.backend_error,
            "the guest was silent for 4200 ms while the program ran (nudged 2 times)");
  // One nudge that revived the guest at once: a short silence, still on the record.
  s.longest_silence = std::chrono::milliseconds(2100);
  s.nudges = 1;
  EXPECT_EQ(ResultOf(TenSecondPlan(), s, 256, 0, "microvm/tcg").backend_error,
            "the guest was silent for 2100 ms while the program ran (nudged 1 times)");
  // Neither: nothing to say.
  s.longest_silence = std::chrono::milliseconds(1100);
  s.nudges = 0;
  EXPECT_EQ(ResultOf(TenSecondPlan(), s, 256, 0, "microvm/tcg").backend_error, "");
}

TEST(MicrovmResultTest, AnExitReportIsTheResult) {
  SessionResult s = EndedRun(2100, 3);
  s.stdout_data = "hi\n";
  s.exit->stdout_total = 3;
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
