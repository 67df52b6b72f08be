// Real microVM runs (QEMU -M microvm, TCG here): output, exit status, limits, mounts, refusals,
// teardown. Each test boots at least one guest (2-10 s under TCG on the build machine), so the
// suite boots as few as it can: several properties are checked per run where that stays readable.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "drivers/microvm/microvm_driver.h"
#include "tests/microvm/microvm_test_util.h"
#include "tests/support/leak_check.h"

namespace safex::microvm::testing {
namespace {

using drivers::LimitHit;
using drivers::MicrovmDriver;
using drivers::RunRequest;
using drivers::RunResult;

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string NextRunId() {
  static int n = 0;
  return "mvt-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

class MicrovmRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    leak_options_.state_root = TestStateRoot() + "/runs";
    before_ = safex::testing::LeakSnapshot::Take(leak_options_);
  }
  void TearDown() override {
    auto leaks = safex::testing::WaitForNoLeaks(before_, std::chrono::seconds(5), leak_options_);
    EXPECT_TRUE(leaks.empty()) << "left behind:\n" << safex::testing::JoinLines(leaks);
  }

  Result<RunResult> RunPlan(const plan::Plan& p, std::vector<std::string> argv,
                            drivers::MicrovmOptions o = TestOptions(),
                            std::optional<std::string> stdin_data = std::nullopt) {
    MicrovmDriver d(o);
    RunRequest req;
    req.run_id = NextRunId();
    req.argv = std::move(argv);
    req.stdin_data = std::move(stdin_data);
    req.input_dir = input_dir_;
    req.collect_output = collector_;
    return d.Run(p, req);
  }

  safex::testing::LeakCheckOptions leak_options_;
  safex::testing::LeakSnapshot before_;
  std::string input_dir_;
  drivers::OutputCollector collector_;
};

TEST_F(MicrovmRunTest, HelloWorldExactStdoutAndExitStatus) {
  SAFEX_REQUIRE_MICROVM();
  auto r = RunPlan(BusyboxPlan(), Sh("echo hello; echo oops >&2; exit 3"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_stream.data, "hello\n");
  EXPECT_EQ(r->stderr_stream.data, "oops\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->term_signal, 0);
  EXPECT_EQ(r->limit, LimitHit::kNone);
  EXPECT_EQ(r->backend_mode, "microvm/tcg/network=none");
  EXPECT_FALSE(r->stdout_stream.truncated);
  EXPECT_GT(r->wall_ns, 0u);
  EXPECT_GT(r->cpu_ns, 0u);
  EXPECT_GT(r->peak_memory_bytes, 0u);
  EXPECT_EQ(r->teardown_error, "");
}

TEST_F(MicrovmRunTest, GuestKernelDiffersFromTheHosts) {
  SAFEX_REQUIRE_MICROVM();
  auto r = RunPlan(BusyboxPlan(), {"/bin/busybox", "uname", "-r"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  utsname u{};
  uname(&u);
  ASSERT_EQ(r->exit_code, 0) << r->stderr_stream.data;
  EXPECT_FALSE(r->stdout_stream.data.empty());
  EXPECT_NE(r->stdout_stream.data, std::string(u.release) + "\n");
  EXPECT_NE(r->stdout_stream.data.find("cloud-amd64"), std::string::npos) << r->stdout_stream.data;
}


// One boot, several properties of the sandbox the program sees.
TEST_F(MicrovmRunTest, SandboxShapeUserLimitsAndReadOnlyRoot) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.process.uid = 1000;
  p.process.gid = 1001;
  auto r = RunPlan(p, Sh("id -u; id -g; ulimit -n; hostname; ls /dev | tr '\\n' ' '; echo;"
                         "grep -E '^(NoNewPrivs|CapEff|CapBnd):' /proc/self/status | tr -s '\\t' ' ';"
                         "touch /bin/x 2>/dev/null && echo root-writable || echo root-ro;"
                         "echo hi > /tmp/f && cat /tmp/f;"
                         "cp /bin/busybox /tmp/bb && /tmp/bb true 2>/dev/null && echo tmp-exec || "
                         "echo tmp-noexec;"
                         "ls /proc | grep -c '^[0-9]'; cat /etc/passwd | cut -d: -f1 | tr '\\n' ' '"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_stream.data;
  std::vector<std::string> lines = Lines(r->stdout_stream.data);
  ASSERT_EQ(lines.size(), 13u) << r->stdout_stream.data;
  EXPECT_EQ(lines[0], "1000");
  EXPECT_EQ(lines[1], "1001");
  EXPECT_EQ(lines[2], "64");  // open_files
  EXPECT_EQ(lines[3], "sandbox");
  EXPECT_EQ(lines[4], "fd full null random shm stderr stdin stdout urandom zero ");
  EXPECT_EQ(lines[5], "CapEff: 0000000000000000");
  EXPECT_EQ(lines[6], "CapBnd: 0000000000000000");
  EXPECT_EQ(lines[7], "NoNewPrivs: 1");
  EXPECT_EQ(lines[8], "root-ro");
  EXPECT_EQ(lines[9], "hi");
  EXPECT_EQ(lines[10], "tmp-noexec");
  // Its own pid namespace: the shell and the pipeline, never the agent or kernel threads.
  EXPECT_LE(std::stoi(lines[11]), 4) << lines[11];
  EXPECT_EQ(lines[12], "root sandbox ");
}

TEST_F(MicrovmRunTest, EnvironmentIsExactlyThePlans) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.env = {{"PATH", "/bin"}, {"A", "x y"}, {"B", "$(id);`id`|&"}, {"EMPTY", ""}};
  auto r = RunPlan(p, {"/bin/busybox", "env"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // The plan's environment is a sorted map: that order, nothing added.
  EXPECT_EQ(r->stdout_stream.data, "A=x y\nB=$(id);`id`|&\nEMPTY=\nPATH=/bin\n");
}

TEST_F(MicrovmRunTest, ArgvIsPassedVerbatim) {
  SAFEX_REQUIRE_MICROVM();
  auto r = RunPlan(BusyboxPlan(), {"busybox", "echo", "$(id)", "a  b", ";", "'\"*", "`x`", "&&",
                                   "$HOME", "\\n"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0);
  // argv[0] without '/' is looked up in the plan's PATH; nothing is interpreted.
  EXPECT_EQ(r->stdout_stream.data, "$(id) a  b ; '\"* `x` && $HOME \\n\n");
}

TEST_F(MicrovmRunTest, CommandNotFoundIs127) {
  SAFEX_REQUIRE_MICROVM();
  auto r = RunPlan(BusyboxPlan(), {"/bin/no-such-program", "x"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 127);
  EXPECT_NE(r->backend_error.find("not found"), std::string::npos) << r->backend_error;
  EXPECT_TRUE(r->stdout_stream.data.empty());
}

TEST_F(MicrovmRunTest, SeccompErrnoRuleBites) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.seccomp.rules = {{"mkdir", plan::SyscallAction::kErrno, 1},
                     {"mkdirat", plan::SyscallAction::kErrno, 1}};
  auto r = RunPlan(p, Sh("mkdir /tmp/a; echo rc=$?; touch /tmp/b && echo touched"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_stream.data, "rc=1\ntouched\n");
  EXPECT_NE(r->stderr_stream.data.find("Operation not permitted"), std::string::npos)
      << r->stderr_stream.data;
}

TEST_F(MicrovmRunTest, SeccompKillRuleKillsWithSigsys) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.seccomp.rules = {{"uname", plan::SyscallAction::kKill, 1}};
  auto r = RunPlan(p, {"/bin/busybox", "uname", "-r"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->term_signal, SIGSYS);
  EXPECT_TRUE(r->stdout_stream.data.empty());
}

TEST_F(MicrovmRunTest, WallTimeKillsTheVmAtTheDeadline) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.limits.wall_time_ns = 3'000'000'000ull;
  auto t0 = std::chrono::steady_clock::now();
  auto r = RunPlan(p, Sh("echo started; trap '' TERM; sleep 1000"));
  auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->limit, LimitHit::kWallTime);
  EXPECT_EQ(r->term_signal, SIGKILL);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->stdout_stream.data, "started\n");
  EXPECT_GE(r->wall_ns, 3'000'000'000ull);
  EXPECT_LT(r->wall_ns, 4'500'000'000ull);
  EXPECT_LT(elapsed, std::chrono::seconds(100));  // boot + 3 s, never the program's 1000 s
}

TEST_F(MicrovmRunTest, MemoryLimitKillsInsideTheGuest) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.limits.memory_bytes = 64ull << 20;
  // A memory string doubled until it no longer fits (malloc itself fails for one huge request
  // under the guest's overcommit heuristics, so grow in steps).
  auto r = RunPlan(p, Sh("echo start; busybox awk 'BEGIN { s = \"xxxxxxxxxxxxxxxx\"; "
                         "for (i = 0; i < 30; i++) s = s s; print length(s) }'; echo survived"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->limit, LimitHit::kMemory) << r->limit_detail << " / " << r->backend_error << " / "
                                         << r->stderr_stream.data;
  EXPECT_EQ(r->term_signal, SIGKILL);
  EXPECT_EQ(r->stdout_stream.data, "start\n");
  EXPECT_GT(r->peak_memory_bytes, 32ull << 20);
  EXPECT_LE(r->peak_memory_bytes, (64ull << 20) + (1ull << 20));
}

TEST_F(MicrovmRunTest, FillingATmpfsCountsAgainstTheMemoryLimit) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.limits.memory_bytes = 48ull << 20;
  p.mounts.push_back(Tmpfs("/big", 256ull << 20));
  // Files below the per-file limit (disk_bytes: RLIMIT_FSIZE), together beyond the memory limit.
  auto r = RunPlan(p, Sh("echo start; for i in 1 2 3 4 5 6 7 8; do "
                         "head -c 12000000 /dev/zero > /big/x$i; done; echo survived"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->limit, LimitHit::kMemory) << r->limit_detail << " / " << r->stderr_stream.data;
  EXPECT_EQ(r->stdout_stream.data, "start\n");
}

TEST_F(MicrovmRunTest, ProcessLimitMakesForkFail) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.limits.pids = 8;
  auto r = RunPlan(p, Sh("n=0; for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do "
                         "sleep 30 & n=$((n+1)); done 2>/dev/null; echo done"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->limit, LimitHit::kPids) << r->limit_detail;
  EXPECT_GT(r->fork_failures, 0u);
  EXPECT_NE(r->limit_detail.find("pids = 8"), std::string::npos) << r->limit_detail;
}

TEST_F(MicrovmRunTest, OutputCapTruncatesAndStopsTheRun) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.limits.output_bytes = 100000;
  auto r = RunPlan(p, Sh("yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->limit, LimitHit::kOutput);
  EXPECT_EQ(r->stdout_stream.data.size(), 100000u);
  EXPECT_TRUE(r->stdout_stream.truncated);
  EXPECT_GT(r->stdout_stream.total_bytes, 100000u);
  EXPECT_EQ(r->term_signal, SIGKILL);
}

TEST_F(MicrovmRunTest, CpuTimeLimitIsEnforced) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.limits.cpu_time_ns = 1'500'000'000ull;
  p.limits.wall_time_ns = 120'000'000'000ull;
  auto r = RunPlan(p, Sh("while :; do :; done"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->limit, LimitHit::kCpuTime) << r->limit_detail;
  EXPECT_GE(r->cpu_ns, 1'500'000'000ull);
  EXPECT_LT(r->cpu_ns, 3'000'000'000ull);
}

}  // namespace
}  // namespace safex::microvm::testing
