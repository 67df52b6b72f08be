// The warm pool's sandboxes (drivers/driver.h, PreparedSandbox; gvisor/pooled_sandbox.h): made
// ahead by GvisorDriver::Prepare, run once by RunPrepared. A pooled run must be what a cold run
// is to the program (same filter, user, filesystem, stdin) and to its limits (the wall clock and
// the CPU count start at the hand-over), and each sandbox serves one run.
#include <gmock/gmock.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include "common/fs_tree.h"
#include "common/unique_fd.h"
#include "plan/plan_json.h"
#include "tests/drivers/gvisor_test_fixture.h"

namespace safex::drivers::testing {
namespace {

using ::testing::HasSubstr;

class GvisorPoolTest : public GvisorTest {
 protected:
  std::unique_ptr<PreparedSandbox> MustPrepare(const plan::Plan& p) {
    PrepareRequest req;
    req.sandbox_id = "sbx-" + NextRunId();
    auto sb = driver_->Prepare(p, req);
    EXPECT_TRUE(sb.ok()) << sb.status().ToString();
    if (!sb.ok()) return nullptr;
    return std::move(sb).value();
  }

  RunResult MustRunPooled(std::unique_ptr<PreparedSandbox> sb, const plan::Plan& p,
                          std::vector<std::string> argv,
                          std::optional<std::string> stdin_data = std::nullopt) {
    RunRequest req;
    req.run_id = NextRunId();
    req.argv = std::move(argv);
    req.stdin_data = std::move(stdin_data);
    auto r = driver_->RunPrepared(std::move(sb), p, req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return RunResult{};
    EXPECT_EQ(r->teardown_error, "");
    return *r;
  }

  void ExpectFrozenUntilItsRun(const plan::Plan& p);
};

// The names of what was made in the watched directory since `watch` (an inotify instance with
// an IN_CREATE watch on it) was last read.
std::vector<std::string> Created(int watch) {
  std::vector<std::string> names;
  alignas(inotify_event) char buf[4096];
  for (ssize_t n; (n = read(watch, buf, sizeof buf)) > 0;) {
    for (char* p = buf; p < buf + n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(p);
      if (ev->len > 0) names.emplace_back(ev->name);
      p += sizeof(inotify_event) + ev->len;
    }
  }
  return names;
}

// An inotify instance watching the state root for what is made in it (read with Created);
// invalid if it could not be set up.
UniqueFd WatchStateRoot() {
  UniqueFd watch(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (watch.valid() &&
      inotify_add_watch(watch.get(), GvisorOptions().state_root.c_str(), IN_CREATE) < 0) {
    watch.Reset();
  }
  return watch;
}

// Longer than the 2 s (kProbeFresh) a full probe, or a boot's renewal of it, stands for Probe.
constexpr auto kProbeStale = std::chrono::milliseconds(2200);

bool AnyProbeDir(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    if (n.rfind("probe-", 0) == 0) return true;
  }
  return false;
}

// A boot that reached its launcher's report did all a full probe does (a cgroup with every
// limit, a directory in the state root, runsc), so it renews the probe: a Probe right after it,
// more than 2 s (kProbeFresh) after the last full probe, is a quick check and makes no probe
// directory in the state root. Without a boot, a Probe that late does make one.
TEST_F(GvisorPoolTest, ABootRenewsTheProbeSoARunRightAfterItPaysNoFullProbe) {
  plan::Plan p = BasePlan();
  std::this_thread::sleep_for(kProbeStale);  // SetUp's full probe is too old to stand
  auto sb = MustPrepare(p);
  ASSERT_NE(sb, nullptr);
  UniqueFd watch = WatchStateRoot();
  ASSERT_TRUE(watch.valid());
  ASSERT_TRUE(driver_->Probe().ok());
  EXPECT_FALSE(AnyProbeDir(Created(watch.get()))) << "a full probe right after a boot";
  std::this_thread::sleep_for(kProbeStale);
  ASSERT_TRUE(driver_->Probe().ok());
  EXPECT_TRUE(AnyProbeDir(Created(watch.get()))) << "no full probe once the boot's was too old";
  MustRunPooled(std::move(sb), p, {"/bin/true"});
}

// A run in a sandbox already made (pooled, or a session's) makes no cgroup and no state
// directory: for it the last full probe's answer stands however old it is (an agent's loop
// pauses for seconds between runs), while runsc is the same file. A Probe that late for a run
// that makes its own sandbox does probe fully, and so does a driver no probe has passed in yet.
TEST_F(GvisorPoolTest, ARunInAMadeSandboxPaysNoFullProbeHoweverOldTheLastOne) {
  plan::Plan p = BasePlan();
  auto sb = MustPrepare(p);
  ASSERT_NE(sb, nullptr);
  std::this_thread::sleep_for(kProbeStale);  // the boot's renewal is too old for Probe
  UniqueFd watch = WatchStateRoot();
  ASSERT_TRUE(watch.valid());
  ASSERT_TRUE(driver_->ProbeForMadeSandbox().ok());
  EXPECT_FALSE(AnyProbeDir(Created(watch.get()))) << "a full probe for a made sandbox's run";
  ASSERT_TRUE(driver_->Probe().ok());
  EXPECT_TRUE(AnyProbeDir(Created(watch.get()))) << "no full probe for a run of its own";
  GvisorDriver unprobed;  // the fixture's options, nothing probed yet
  ASSERT_TRUE(unprobed.ProbeForMadeSandbox().ok());
  EXPECT_TRUE(AnyProbeDir(Created(watch.get()))) << "no full probe where none had passed";
  MustRunPooled(std::move(sb), p, {"/bin/true"});
}

TEST_F(GvisorPoolTest, APooledRunIsTheProgramUnderThePlan) {
  plan::Plan p = BasePlan();
  auto sb = MustPrepare(p);
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sb->plan_digest(), plan::PlanDigest(p));
  EXPECT_FALSE(sb->enforcement().Differs()) << sb->enforcement().Differences();
  EXPECT_TRUE(sb->Healthy());
  RunResult r = MustRunPooled(std::move(sb), p, {"/bin/sh", "-c", "id -u; cat; echo $$; exit 3"},
                              "from stdin\n");
  EXPECT_EQ(r.exit_code, 3);
  // The program is the container's first process (pid 1), exec'd in the waiter's place.
  EXPECT_EQ(r.stdout_stream.data, std::to_string(p.process.uid) + "\nfrom stdin\n1\n");
  EXPECT_FALSE(r.enforcement.fields.empty());
}

TEST_F(GvisorPoolTest, WithoutStdinTheProgramReadsDevNullAsInAColdRun) {
  plan::Plan p = BasePlan();
  const std::vector<std::string> argv = {"/bin/sh", "-c",
                                         "test -c /proc/self/fd/0 && echo char; cat; echo end"};
  RunResult cold = MustRun(p, argv);
  RunResult pooled = MustRunPooled(MustPrepare(p), p, argv);
  EXPECT_EQ(cold.stdout_stream.data, "char\nend\n");
  EXPECT_EQ(pooled.stdout_stream.data, cold.stdout_stream.data);
}

TEST_F(GvisorPoolTest, AFileWrittenByOnePooledRunIsAbsentInTheNext) {
  plan::Plan p = BasePlan();
  auto first = MustPrepare(p);
  auto second = MustPrepare(p);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(first->id(), second->id());
  RunResult w = MustRunPooled(std::move(first), p,
                              {"/bin/sh", "-c", "echo secret > /tmp/marker && cat /tmp/marker"});
  EXPECT_EQ(w.stdout_stream.data, "secret\n");
  RunResult r =
      MustRunPooled(std::move(second), p,
                    {"/bin/sh", "-c", "test -e /tmp/marker && echo present || echo absent"});
  EXPECT_EQ(r.stdout_stream.data, "absent\n");
}

// The request's input snapshot reaches the sandbox booted without it: moved into the stand-in
// bound since the boot, seen at once, read-only to the program as in a cold run (same listing,
// same modes), and the snapshot is left empty (the entries moved, nothing copied).
TEST_F(GvisorPoolTest, TheInputSnapshotIsMovedIntoTheWaitingSandbox) {
  plan::Plan p = BasePlan();
  p.mounts.push_back(Input("/data/in"));
  char tmpl[] = "/tmp/safex-pool-input-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string snapshot = tmpl;
  ASSERT_EQ(mkdir((snapshot + "/sub").c_str(), 0555), 0);
  std::ofstream(snapshot + "/given.txt") << "input data";
  ASSERT_EQ(chmod((snapshot + "/given.txt").c_str(), 0444), 0);
  ASSERT_EQ(chmod(snapshot.c_str(), 0555), 0);
  const std::vector<std::string> argv = {"/bin/sh", "-c",
                                         "cat /data/in/given.txt; echo; ls -ln /data/in | grep -v "
                                         "^total | cut -c1-10; stat -c %a /data/in; "
                                         "echo x > /data/in/new || echo refused"};
  auto sb = MustPrepare(p);
  ASSERT_NE(sb, nullptr);
  RunRequest req;
  req.run_id = NextRunId();
  req.argv = argv;
  req.input_dir = snapshot;
  auto pooled = driver_->RunPrepared(std::move(sb), p, req);
  ASSERT_TRUE(pooled.ok()) << pooled.status().ToString();
  EXPECT_EQ(pooled->teardown_error, "");
  EXPECT_EQ(pooled->stdout_stream.data, "input data\n-r--r--r--\ndr-xr-xr-x\n555\nrefused\n");
  chmod(snapshot.c_str(), 0755);
  EXPECT_TRUE(ListDirectoryOrEmpty(snapshot).empty()) << "the entries were moved, not copied";
  // The same listing in a cold run of the same snapshot.
  std::ofstream(snapshot + "/given.txt") << "input data";
  ASSERT_EQ(chmod((snapshot + "/given.txt").c_str(), 0444), 0);
  ASSERT_EQ(mkdir((snapshot + "/sub").c_str(), 0555), 0);
  ASSERT_EQ(chmod(snapshot.c_str(), 0555), 0);
  auto cold = Run(p, argv, std::nullopt, nullptr, snapshot);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  EXPECT_EQ(cold->stdout_stream.data, pooled->stdout_stream.data);
  EXPECT_TRUE(RemoveTree(snapshot).ok());
}

// Not `runsc exec`, which on this runsc skips the OCI filter: the program is the launcher's
// exec, under the filter the sandbox was made with.
TEST_F(GvisorPoolTest, ThePlansSeccompFilterHoldsForThePooledProgram) {
  plan::Plan p = PlanWithProbe();
  p.seccomp.rules = {{"mkdir", plan::SyscallAction::kKill, 0}};
  RunResult r = MustRunPooled(MustPrepare(p), p, {kProbe, "mkdir", "/tmp/d"});
  EXPECT_EQ(r.term_signal, SIGSYS);
  EXPECT_EQ(r.stdout_stream.data, "");
}

// The launcher is linked against musl but makes a glibc program's calls (launch/syscalls.h): a
// filter that lets the host's programs run lets it report and hand over, cold and pooled.
TEST_F(GvisorPoolTest, TheLauncherMakesNoCallTheHostsProgramsDoNot) {
  plan::Plan p = PlanKillingMuslOnlyCalls();
  const std::vector<std::string> argv = {"/bin/sh", "-c", "cat /etc/hosts | head -n1; echo ok"};
  RunResult cold = MustRun(p, argv);
  EXPECT_EQ(cold.exit_code, 0) << cold.stderr_stream.data;
  EXPECT_THAT(cold.stdout_stream.data, ::testing::EndsWith("ok\n"));
  RunResult pooled = MustRunPooled(MustPrepare(p), p, argv);
  EXPECT_EQ(pooled.exit_code, 0) << pooled.stderr_stream.data;
  EXPECT_EQ(pooled.stdout_stream.data, cold.stdout_stream.data);
}

// The wall clock starts at the hand-over, and the CPU the sandbox used to boot and wait is not
// the run's: a sandbox that waited longer than the wall limit still runs its program whole.
TEST_F(GvisorPoolTest, TheRunsClocksStartAtTheHandOver) {
  plan::Plan p = BasePlan();
  p.limits.wall_time_ns = 2'000'000'000;
  auto sb = MustPrepare(p);
  ASSERT_NE(sb, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ASSERT_TRUE(sb->Healthy());
  RunResult pooled = MustRunPooled(std::move(sb), p, {"/bin/sh", "-c", "sleep 1; echo done"});
  EXPECT_EQ(pooled.limit, LimitHit::kNone) << pooled.limit_detail;
  EXPECT_EQ(pooled.stdout_stream.data, "done\n");
  EXPECT_GE(pooled.wall_ns, 1'000'000'000u);
  RunResult cold = MustRun(p, {"/bin/true"});
  RunResult pooled_true = MustRunPooled(MustPrepare(p), p, {"/bin/true"});
  // The cold figure includes the Sentry's boot; the pooled one only the program's exec and exit.
  EXPECT_LT(pooled_true.cpu_ns, cold.cpu_ns);
}

TEST_F(GvisorPoolTest, ASandboxRunsOnlyThePlanItWasMadeFrom) {
  plan::Plan p = BasePlan();
  plan::Plan other = BasePlan();
  other.limits.pids = p.limits.pids + 1;
  auto sb = MustPrepare(p);
  ASSERT_NE(sb, nullptr);
  RunRequest req;
  req.run_id = NextRunId();
  req.argv = {"/bin/true"};
  auto r = driver_->RunPrepared(std::move(sb), other, req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("another plan"));
}

// A waiting sandbox is frozen (run_steps.h, Park): an idle Sentry on systrap uses CPU for its
// timers, which a pool would take from running sandboxes. Its run thaws it and runs as ever.
// A sandbox of `p` is made, found frozen, uses no CPU for 1.5 s, then runs /bin/echo.
void GvisorPoolTest::ExpectFrozenUntilItsRun(const plan::Plan& p) {
  auto sb = MustPrepare(p);
  ASSERT_NE(sb, nullptr);
  const bool v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
  const std::string dir =
      v2 ? "/sys/fs/cgroup/safex/" + sb->id() : "/sys/fs/cgroup/freezer/safex/" + sb->id();
  const std::string state_file = dir + (v2 ? "/cgroup.freeze" : "/freezer.state");
  auto read_first_word = [](const std::string& path) {
    std::ifstream in(path);
    std::string w;
    in >> w;
    return w;
  };
  auto cpu_ns = [&]() -> uint64_t {
    if (!v2) {
      uint64_t ns = 0;
      std::ifstream("/sys/fs/cgroup/cpuacct/safex/" + sb->id() + "/cpuacct.usage") >> ns;
      return ns;
    }
    std::ifstream in(dir + "/cpu.stat");
    std::string key;
    uint64_t usec = 0;
    in >> key >> usec;  // usage_usec first
    return usec * 1000;
  };
  // Freezing completes as each task next returns to user space.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (read_first_word(state_file) != (v2 ? "1" : "FROZEN") &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(read_first_word(state_file), v2 ? "1" : "FROZEN");
  const uint64_t before = cpu_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(cpu_ns(), before) << "a frozen sandbox used CPU while it waited";
  ASSERT_TRUE(sb->Healthy());
  RunResult r = MustRunPooled(std::move(sb), p, {"/bin/echo", "hi"});
  EXPECT_EQ(r.stdout_stream.data, "hi\n");
  EXPECT_EQ(r.exit_code, 0);
}

TEST_F(GvisorPoolTest, AWaitingSandboxIsFrozenAndUsesNoCpuUntilItsRun) {
  ExpectFrozenUntilItsRun(BasePlan());
}

// On ptrace the Sentry's address spaces are its ptrace tracees (systrap: its stub processes):
// all of them are in the run's cgroup, frozen and thawed with it, and the tracer picks them up
// again after the thaw (docs/operating.md: ptrace is the pool's faster platform here).
TEST_F(GvisorPoolTest, OnPtraceTooAWaitingSandboxIsFrozenAndRunsAfterItsThaw) {
  plan::Plan p = BasePlan();
  p.gvisor.platform = "ptrace";
  ExpectFrozenUntilItsRun(p);
}

// Destroyed unused (evicted, the service stopping): nothing is left (the fixture's leak check),
// and nothing ran in it.
TEST_F(GvisorPoolTest, AnUnusedSandboxIsDestroyedWhole) {
  plan::Plan p = BasePlan();
  auto a = MustPrepare(p);
  auto b = MustPrepare(p);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  a.reset();
  b.reset();
}

}  // namespace
}  // namespace safex::drivers::testing
