// The gVisor driver's pure decisions: the `runsc run` command line (golden), the outcome
// classifier over messages recorded from runsc 20240729, and the 127 decided before a sandbox is
// made. Unprivileged.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "drivers/gvisor/outcome.h"
#include "drivers/gvisor/program_lookup.h"
#include "drivers/gvisor/runsc_command.h"
#include "tests/drivers/test_plans.h"
#include "tests/support/temp_dir.h"

namespace safex::drivers::gvisor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Recorded with `runsc --network=none run` of a bundle whose root binds /usr, /lib, /lib64 and
// /bin (the runsc exit status was 128 each time).
constexpr char kBareNameNotInPath[] =
    "running container: starting container: starting root container: starting sandbox: error "
    "finding executable \"definitely-not-a-command\" in PATH [/usr/bin /bin]: no such file or "
    "directory";
constexpr char kAbsoluteMissing[] =
    "running container: starting container: starting root container: starting sandbox: creating "
    "process: failed to load /usr/bin/nonexistent: no such file or directory";
constexpr char kNotExecutable[] =
    "running container: starting container: starting root container: starting sandbox: creating "
    "process: failed to load /usr/lib/os-release: permission denied";
constexpr char kDirectory[] =
    "running container: starting container: starting root container: starting sandbox: creating "
    "process: failed to load /usr: permission denied";

ExitStatus Exited(int code) { return ExitStatus{true, code, 0}; }

TEST(RunscCommandTest, GoldenRunCommandLine) {
  RunscRun r;
  r.runsc_path = "/usr/local/bin/runsc";
  r.state_dir = "/run/safex/r1/state";
  r.bundle = "/run/safex/r1/bundle";
  r.run_id = "r1";
  r.platform = "systrap";
  r.logged.names = {"openat"};
  EXPECT_THAT(RunscRunArgv(r),
              ElementsAre("/usr/local/bin/runsc", "--root=/run/safex/r1/state", "--network=none",
                          "--oci-seccomp", "--platform=systrap", "--overlay2=none",
                          "--debug-log=/proc/self/fd/6", "--strace", "--strace-log-size=64",
                          "--strace-syscalls=clone,clone3,fork,vfork,openat", "run", "--bundle",
                          "/run/safex/r1/bundle", "--pass-fd", "3:0", "--pass-fd", "4:1",
                          "--pass-fd", "5:2", "r1"));
  // The launcher's report and go-ahead pipes (launch_report.h) are container fds 3 and 4.
  r.launcher = true;
  std::vector<std::string> launched = RunscRunArgv(r);
  EXPECT_THAT(std::vector<std::string>(launched.end() - 5, launched.end()),
              ElementsAre("--pass-fd", "7:3", "--pass-fd", "8:4", "r1"));
  r.network = true;
  r.logged.all = true;
  std::vector<std::string> with_net = RunscRunArgv(r);
  EXPECT_EQ(with_net[2], "--network=host");
  for (const std::string& a : with_net) EXPECT_FALSE(a.starts_with("--strace-syscalls")) << a;
}

TEST(OutcomeTest, RecordedNotFoundAndNotExecutableShapes) {
  EXPECT_EQ(NotRunnableStatus(Exited(128), kBareNameNotInPath), 127);  // the bare-name shape
  EXPECT_EQ(NotRunnableStatus(Exited(128), kAbsoluteMissing), 127);
  EXPECT_EQ(NotRunnableStatus(Exited(128), kNotExecutable), 126);
  EXPECT_EQ(NotRunnableStatus(Exited(128), kDirectory), 126);
  EXPECT_EQ(NotRunnableStatus(Exited(128), "failed to load /x: exec format error"), 126);
  EXPECT_EQ(NotRunnableStatus(Exited(1), kAbsoluteMissing), std::nullopt);  // not runsc's start
  EXPECT_EQ(NotRunnableStatus(Exited(128), "creating sandbox: cgroup: EBUSY"), std::nullopt);
}

TEST(OutcomeTest, TheProgramsOwnExitWhenRunscAgrees) {
  Observation o;
  o.app_started = true;
  o.app_exit = SandboxLogScanner::AppExit{false, 3};
  o.runsc = Exited(3);
  o.runsc_reaped = true;
  auto out = Classify(o, testing::BasePlan().limits);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->exit_code, 3);
  EXPECT_EQ(out->limit, LimitHit::kNone);
  o.app_exit = SandboxLogScanner::AppExit{true, SIGSEGV};
  o.runsc = Exited(128 + SIGSEGV);
  out = Classify(o, testing::BasePlan().limits);
  EXPECT_EQ(out->term_signal, SIGSEGV);
}

TEST(OutcomeTest, NotFoundIs127WithRunscsWordsForTheRecordOnly) {
  Observation o;
  o.runsc = Exited(128);
  o.runsc_error = kBareNameNotInPath;
  auto out = Classify(o, testing::BasePlan().limits);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->exit_code, 127);
  EXPECT_EQ(out->backend_error, kBareNameNotInPath);
}

TEST(OutcomeTest, ASandboxThatNeverStartedIsASetupErrorInSafexsWords) {
  Observation o;
  o.runsc = Exited(128);
  o.runsc_error = "running container: creating container: cgroups: write EBUSY";
  auto out = Classify(o, testing::BasePlan().limits);
  ASSERT_FALSE(out.ok());
  const std::string& m = out.status().message();
  EXPECT_EQ(m.substr(0, m.find('\n')),
            "gvisor: the sandbox could not start the program (runsc exit 128)");
  EXPECT_THAT(m.substr(m.find('\n')), HasSubstr("runsc: running container"));
}

TEST(OutcomeTest, PrecedenceOfLimits) {
  const plan::Limits lim = testing::BasePlan().limits;
  Observation stopped;
  stopped.stopped_for = LimitHit::kWallTime;
  stopped.stop_detail = "wall time";
  stopped.oom_kills = 1;  // a limit the supervisor stopped the run for comes first
  auto out = Classify(stopped, lim);
  EXPECT_EQ(out->limit, LimitHit::kWallTime);
  EXPECT_EQ(out->term_signal, SIGKILL);

  Observation cancelled = stopped;
  cancelled.cancelled = true;
  EXPECT_TRUE(Classify(cancelled, lim)->interrupted);

  Observation oom;
  oom.app_started = true;
  oom.app_exit = SandboxLogScanner::AppExit{true, SIGKILL};
  oom.runsc = Exited(128 + SIGKILL);
  oom.oom_kills = 2;
  oom.fork_failures = 5;
  EXPECT_EQ(Classify(oom, lim)->limit, LimitHit::kMemory);

  Observation forks = oom;
  forks.oom_kills = 0;
  forks.app_exit = SandboxLogScanner::AppExit{false, 0};
  forks.runsc = Exited(0);
  auto f = Classify(forks, lim);
  EXPECT_EQ(f->limit, LimitHit::kPids);
  EXPECT_THAT(f->limit_detail, HasSubstr("then exited normally"));

  Observation full = forks;
  full.fork_failures = 0;
  full.app_exit = SandboxLogScanner::AppExit{false, 1};
  full.runsc = Exited(1);
  full.full_outputs = {{"/data/out", 16 << 20}};
  auto d = Classify(full, lim);
  EXPECT_EQ(d->limit, LimitHit::kDisk);
  EXPECT_THAT(d->limit_detail, HasSubstr("/data/out is full"));
}

TEST(ProgramLookupTest, CertainlyMissingOnlyWhenTheRootViewSaysSo) {
  ::safex::testing::TempDir tree;
  tree.Write("present", "#!/bin/sh\n");
  plan::Plan p = testing::BasePlan();  // binds /usr, /lib, /lib64, /bin; PATH=/usr/bin:/bin
  p.mounts.push_back(testing::BindRo(tree.path()));
  p.mounts.back().target = "/opt/tree";
  EXPECT_TRUE(CertainlyMissingProgram(p, "definitely-not-a-command", "").has_value());
  EXPECT_TRUE(CertainlyMissingProgram(p, "/usr/bin/definitely-not-a-command", "").has_value());
  EXPECT_TRUE(CertainlyMissingProgram(p, "/opt/tree/absent", "").has_value());
  EXPECT_FALSE(CertainlyMissingProgram(p, "/opt/tree/present", "").has_value());
  EXPECT_FALSE(CertainlyMissingProgram(p, "sh", "").has_value());  // it exists
  EXPECT_FALSE(CertainlyMissingProgram(p, "/usr/bin/sh", "").has_value());
  EXPECT_FALSE(CertainlyMissingProgram(p, "/nowhere/x", "").has_value());  // under no mount
  ASSERT_EQ(symlink("/elsewhere", tree.Join("link").c_str()), 0);
  EXPECT_FALSE(CertainlyMissingProgram(p, "/opt/tree/link/x", "").has_value());  // a symlink
  p.env.erase("PATH");
  EXPECT_FALSE(CertainlyMissingProgram(p, "definitely-not-a-command", "").has_value());
}

}  // namespace
}  // namespace safex::drivers::gvisor
