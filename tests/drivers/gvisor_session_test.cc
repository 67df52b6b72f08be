// A gVisor session's sandbox (drivers/driver.h SessionSandbox; gvisor/session_sandbox.h): one
// sandbox, several commands, each a child of the sandbox's init (launch/session.c). What must
// hold: state kept in the writable mounts between commands, nothing of a command still running
// after it (background processes killed and counted), each command's output, wall time and
// output cap its own, the plan's filter for every command, and files in and out through the
// init as the program's uid, never following a symlink the program planted.
#include <gmock/gmock.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "plan/plan_json.h"
#include "tests/drivers/gvisor_test_fixture.h"

namespace safex::drivers::testing {
namespace {

using ::testing::HasSubstr;

class GvisorSessionTest : public GvisorTest {
 protected:
  std::unique_ptr<SessionSandbox> MustOpen(const plan::Plan& p) {
    PrepareRequest req;
    req.sandbox_id = "ses-" + NextRunId();
    auto s = driver_->OpenSession(p, req);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return nullptr;
    return std::move(s).value();
  }

  RunResult MustExec(SessionSandbox& s, std::vector<std::string> argv,
                     std::optional<std::string> stdin_data = std::nullopt,
                     const std::atomic<int>* cancel = nullptr) {
    RunRequest req;
    req.run_id = NextRunId();
    req.argv = std::move(argv);
    req.stdin_data = std::move(stdin_data);
    req.cancel = cancel;
    auto r = s.Exec(req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return RunResult{};
    return *r;
  }

  static std::vector<std::string> Sh(const std::string& script) {
    return {"/bin/sh", "-c", script};
  }
};

TEST_F(GvisorSessionTest, CommandsShareTheWritableMountsAndEachHasItsOwnOutput) {
  plan::Plan p = BasePlan();
  auto s = MustOpen(p);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->plan_digest(), plan::PlanDigest(p));
  EXPECT_FALSE(s->enforcement().Differs()) << s->enforcement().Differences();
  RunResult first = MustExec(*s, Sh("echo one > /tmp/state; echo first; echo err >&2; exit 4"));
  EXPECT_EQ(first.exit_code, 4);
  EXPECT_EQ(first.stdout_stream.data, "first\n");
  EXPECT_EQ(first.stderr_stream.data, "err\n");
  RunResult second = MustExec(*s, Sh("cat /tmp/state; id -u"));
  EXPECT_EQ(second.exit_code, 0);
  EXPECT_EQ(second.stdout_stream.data, "one\n" + std::to_string(p.process.uid) + "\n");
  EXPECT_EQ(second.stderr_stream.data, "");
  EXPECT_TRUE(s->Alive());
}

TEST_F(GvisorSessionTest, StdinIsTheRequestsOrDevNull) {
  auto s = MustOpen(BasePlan());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(MustExec(*s, {"/bin/cat"}, std::string("hello\n")).stdout_stream.data, "hello\n");
  RunResult none = MustExec(*s, Sh("test -c /proc/self/fd/0 && echo char; cat; echo end"));
  EXPECT_EQ(none.stdout_stream.data, "char\nend\n");
  // More than a pipe holds: the init feeds it while the command reads.
  const std::string big(1 << 20, 'x');
  EXPECT_EQ(MustExec(*s, Sh("wc -c"), big).stdout_stream.data, "1048576\n");
}

// Nothing a command started outlives it: the init kills every other process when the command's
// own process ends, and says how many.
TEST_F(GvisorSessionTest, BackgroundProcessesAreKilledWhenTheirCommandEnds) {
  auto s = MustOpen(BasePlan());
  ASSERT_NE(s, nullptr);
  RunResult bg = MustExec(
      *s, Sh("(while true; do echo tick >> /tmp/ticks; sleep 0.05; done) & sleep 0.3; echo up"));
  EXPECT_EQ(bg.exit_code, 0);
  EXPECT_EQ(bg.stdout_stream.data, "up\n");
  EXPECT_THAT(bg.limit_detail, HasSubstr("left running were killed"));
  RunResult later = MustExec(*s, Sh("a=$(wc -l < /tmp/ticks); sleep 0.5; b=$(wc -l < /tmp/ticks); "
                                    "test $a = $b && echo still"));
  EXPECT_EQ(later.stdout_stream.data, "still\n");
  // And the only process left between commands is the init: the next command's shell (which
  // expands the glob itself, no child) and the init are all there is.
  RunResult ps = MustExec(*s, Sh("set -- /proc/[0-9]*; echo $#"));
  EXPECT_EQ(ps.stdout_stream.data, "2\n");
}

// A fork under way while the init's kill(-1) goes through the processes can bring a new process
// after it; the init kills again until none is left (launch/session.c). Each command here ends
// while a subshell it left is forking long sleeps: it must end with its own process, not at the
// wall-time limit, and nothing of it may be left for the next.
TEST_F(GvisorSessionTest, AProcessForkedWhileLeftoversAreKilledIsKilledToo) {
  plan::Plan p = BasePlan();
  p.limits.wall_time_ns = 5'000'000'000ull;
  auto s = MustOpen(p);
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < 8; ++i) {
    RunResult r = MustExec(*s, Sh("(for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; "
                                  "do sleep 30 & done; wait) & echo up"));
    EXPECT_EQ(r.limit, LimitHit::kNone) << "command " << i << ": " << r.limit_detail;
    EXPECT_EQ(r.exit_code, 0) << "command " << i;
    EXPECT_EQ(r.stdout_stream.data, "up\n") << "command " << i;
  }
  RunResult ps = MustExec(*s, Sh("set -- /proc/[0-9]*; echo $#"));
  EXPECT_EQ(ps.stdout_stream.data, "2\n");
}

// The init is not dumpable: its memory is not a command's to read or write (to forge answers).
// A command can still kill it (gVisor gives a pid namespace's init no protection from its own
// uid's signals): that ends the session, reported as such, and nothing runs in it again.
TEST_F(GvisorSessionTest, ACommandCannotTraceTheInitAndKillingItEndsTheSession) {
  auto s = MustOpen(BasePlan());
  ASSERT_NE(s, nullptr);
  RunResult mem = MustExec(*s, Sh("cat /proc/1/mem 2>/dev/null && echo read || echo refused"));
  EXPECT_EQ(mem.stdout_stream.data, "refused\n");
  RunResult k = MustExec(*s, Sh("kill -9 1; sleep 5"));
  EXPECT_THAT(k.backend_error, HasSubstr("sandbox ended"));
  EXPECT_FALSE(s->Alive());
  RunRequest req;
  req.run_id = NextRunId();
  req.argv = {"/bin/true"};
  EXPECT_EQ(s->Exec(req).status().code(), Status::Code::kUnavailable);
}

TEST_F(GvisorSessionTest, ThePlansSeccompFilterHoldsForEveryCommand) {
  plan::Plan p = PlanWithProbe();
  p.seccomp.rules = {{"mkdir", plan::SyscallAction::kKill, 0}};
  auto s = MustOpen(p);
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < 2; ++i) {
    RunResult r = MustExec(*s, {kProbe, "mkdir", "/tmp/d"});
    EXPECT_EQ(r.term_signal, SIGSYS) << "command " << i;
  }
  EXPECT_TRUE(s->Alive());
}

// The session's init forks commands and opens and stats files as a glibc program would (clone,
// openat, newfstatat; launch/syscalls.h), not as musl's wrappers would.
TEST_F(GvisorSessionTest, TheInitMakesNoCallTheHostsProgramsDoNot) {
  auto s = MustOpen(PlanKillingMuslOnlyCalls());
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->WriteFile("/tmp/in.txt", "given\n", 0644).ok());
  RunResult r = MustExec(*s, Sh("cat /tmp/in.txt > /tmp/out.txt; echo done"));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_stream.data;
  EXPECT_EQ(r.stdout_stream.data, "done\n");
  auto out = s->ReadFile("/tmp/out.txt", 1024);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "given\n");
  EXPECT_TRUE(s->Alive());
}

// The launcher's execvp (musl's) never hands a file it cannot execute to /bin/sh, as glibc's
// would for one without `#!`: 126, as the native backend's execve gives.
TEST_F(GvisorSessionTest, AFileWithoutAnInterpreterLineIsNotRunByAShell) {
  plan::Plan p = BasePlan();
  for (plan::Mount& m : p.mounts) m.noexec = false;
  auto s = MustOpen(p);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->WriteFile("/tmp/script", "echo ran-by-a-shell\n", 0755).ok());
  RunResult r = MustExec(*s, {"/tmp/script"});
  EXPECT_EQ(r.exit_code, 126);
  EXPECT_EQ(r.stdout_stream.data, "");
  EXPECT_THAT(r.stderr_stream.data, HasSubstr("Exec format error"));
}

TEST_F(GvisorSessionTest, WallTimeAndOutputAreLimitedPerCommand) {
  plan::Plan p = BasePlan();
  p.limits.wall_time_ns = 1'500'000'000;
  p.limits.output_bytes = 64 * 1024;
  auto s = MustOpen(p);
  ASSERT_NE(s, nullptr);
  RunResult slow = MustExec(*s, Sh("echo begun; sleep 30"));
  EXPECT_EQ(slow.limit, LimitHit::kWallTime);
  EXPECT_EQ(slow.term_signal, SIGKILL);
  EXPECT_EQ(slow.stdout_stream.data, "begun\n");
  EXPECT_LT(slow.wall_ns, 5'000'000'000u);
  RunResult loud = MustExec(*s, Sh("head -c 1000000 /dev/zero"));
  EXPECT_EQ(loud.limit, LimitHit::kOutput);
  EXPECT_EQ(loud.stdout_stream.data.size(), 64u * 1024);
  // The next command has the whole cap and the whole wall time again.
  RunResult next = MustExec(*s, Sh("sleep 1; head -c 60000 /dev/zero | wc -c"));
  EXPECT_EQ(next.limit, LimitHit::kNone);
  EXPECT_EQ(next.stdout_stream.data, "60000\n");
  RunResult again = MustExec(*s, Sh("head -c 60000 /dev/zero"));
  EXPECT_EQ(again.limit, LimitHit::kNone);
  EXPECT_EQ(again.stdout_stream.data.size(), 60000u);
}

TEST_F(GvisorSessionTest, ACancelledCommandIsInterruptedAndTheSessionGoesOn) {
  auto s = MustOpen(BasePlan());
  ASSERT_NE(s, nullptr);
  std::atomic<int> cancel{0};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    cancel = 1;
  });
  RunResult r = MustExec(*s, Sh("sleep 20"), std::nullopt, &cancel);
  canceller.join();
  EXPECT_TRUE(r.interrupted);
  EXPECT_LT(r.wall_ns, 5'000'000'000u);
  EXPECT_EQ(MustExec(*s, Sh("echo on")).stdout_stream.data, "on\n");
}

TEST_F(GvisorSessionTest, FilesGoInAndOutAsTheProgramsUser) {
  plan::Plan p = BasePlan();
  auto s = MustOpen(p);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->WriteFile("/tmp/work/dir/in.txt", "given\n", 0640).ok());
  RunResult r = MustExec(*s, Sh("cat /tmp/work/dir/in.txt; stat -c '%u %a' /tmp/work/dir/in.txt; "
                                "echo made > /tmp/work/out.txt"));
  EXPECT_EQ(r.stdout_stream.data, "given\n" + std::to_string(p.process.uid) + " 640\n");
  auto out = s->ReadFile("/tmp/work/out.txt", 1024);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "made\n");
  auto too_big = s->ReadFile("/tmp/work/out.txt", 3);
  EXPECT_EQ(too_big.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(s->ReadFile("/tmp/none", 10).status().code(), Status::Code::kNotFound);
  // Not the sandbox's root: a read-only file of the host stays read-only.
  EXPECT_FALSE(s->WriteFile("/bin/sh", "x", 0755).ok());
}

// Whatever a command planted, the files helper never follows a symlink (in the last component or
// on the way) and reads and writes regular files only.
TEST_F(GvisorSessionTest, PlantedSymlinksAndSpecialFilesAreRefused) {
  auto s = MustOpen(BasePlan());
  ASSERT_NE(s, nullptr);
  RunResult plant = MustExec(*s, Sh("ln -s /bin/sh /tmp/link; ln -s /bin /tmp/dirlink; "
                                    "mkfifo /tmp/fifo; mkdir /tmp/d"));
  EXPECT_EQ(plant.exit_code, 0) << plant.stderr_stream.data;
  auto link = s->ReadFile("/tmp/link", 1 << 20);
  EXPECT_FALSE(link.ok());
  EXPECT_THAT(link.status().message(), HasSubstr("symlink"));
  EXPECT_THAT(s->WriteFile("/tmp/link", "x", 0644).message(), HasSubstr("symlink"));
  EXPECT_THAT(s->ReadFile("/tmp/dirlink/dash", 1 << 20).status().message(), HasSubstr("symlink"));
  EXPECT_THAT(s->WriteFile("/tmp/dirlink/new", "x", 0644).message(), HasSubstr("symlink"));
  EXPECT_THAT(s->ReadFile("/tmp/fifo", 10).status().message(), HasSubstr("not a regular file"));
  EXPECT_THAT(s->WriteFile("/tmp/fifo", "x", 0644).message(), HasSubstr("not a regular file"));
  EXPECT_FALSE(s->ReadFile("/tmp/d", 10).ok());
  EXPECT_TRUE(s->Alive());
  EXPECT_EQ(MustExec(*s, Sh("ls -l /bin/sh > /dev/null && echo intact")).stdout_stream.data,
            "intact\n");
}

TEST_F(GvisorSessionTest, DestroyingASessionWithACommandsLeftoversLeavesNothing) {
  auto s = MustOpen(BasePlan());
  ASSERT_NE(s, nullptr);
  MustExec(*s, Sh("echo data > /tmp/x"));
  s.reset();  // the fixture's leak check sees nothing of it
}

}  // namespace
}  // namespace safex::drivers::testing
