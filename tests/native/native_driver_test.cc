// Real native runs through NativeDriver (root): the process's identity and environment, the
// evidence read back before exec, every limit with its verdict, stdin and outputs, refusals, and
// Landlock with its forced fallback. Every test also checks that nothing is left on the machine.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "tests/native/native_test_fixture.h"
#include "tests/support/temp_dir.h"

namespace safex::drivers::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::map<std::string, EnforcedField> ByName(const Enforcement& e) {
  std::map<std::string, EnforcedField> out;
  for (const EnforcedField& f : e.fields) out[f.name] = f;
  return out;
}

TEST_F(NativeTest, TheProgramGetsThePlansIdentityEnvironmentAndNothingElse) {
  RunResult r =
      MustRun(NativePlan(), {"/bin/sh", "-c",
                             "id -u; id -g; id -G; ls /proc/self/fd; /usr/bin/env; "
                             "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; "
                             "hostname; echo pid $$"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_stream.data;
  const std::string& out = r.stdout_stream.data;
  // uid, gid, no supplementary groups; only 0-2 (and ls's own directory) open.
  EXPECT_THAT(out, StartsWith("65534\n65534\n65534\n0\n1\n2\n3\n"));
  EXPECT_THAT(out, HasSubstr("PATH=/usr/bin:/bin\nLANG=C.UTF-8\n"));
  EXPECT_EQ(out.find("SAFEX"), std::string::npos) << "the supervisor's environment leaked";
  EXPECT_THAT(out, HasSubstr("CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
                             "NoNewPrivs:\t1\nSeccomp:\t2\n"));
  EXPECT_THAT(out, HasSubstr("safex\npid 1\n"));  // its own uts and pid namespaces
  EXPECT_THAT(r.backend_mode, StartsWith("native/landlock="));
}

TEST_F(NativeTest, TheEvidenceMatchesThePlanAndNamesTheRunsOwnHostId) {
  RunResult r = MustRun(NativePlan(), {"/bin/true"});
  EXPECT_FALSE(r.enforcement.Differs()) << r.enforcement.Differences();
  auto f = ByName(r.enforcement);
  for (const char* name :
       {"process.identity", "process.capabilities", "seccomp.mode", "rlimits", "mounts",
        "process.host_identity", "cgroup.memory_bytes", "cgroup.pids_max"}) {
    ASSERT_TRUE(f.count(name)) << name;
    EXPECT_EQ(f[name].state, EnforcedField::State::kMatches) << name << ": " << f[name].observed;
  }
  // The host id is the run's own, from the reserved range, not 65534.
  const std::string host = f["process.host_identity"].observed;
  const uint64_t uid = std::stoull(host.substr(4));
  EXPECT_GE(uid, 0x70000000u) << host;
  EXPECT_LT(uid, 0x70000000u + 65536) << host;
  EXPECT_EQ(f["landlock"].state, EnforcedField::State::kObserved);
}

// The program counts the plan's CPUs, not the host's (drivers/cgroup/cpuset.h): the run's cpuset
// holds `cpus` of them. (glibc's sysconf count, os.cpu_count(), still reads /proc/stat there.)
TEST_F(NativeTest, TheProgramCountsThePlansCpus) {
  plan::Plan p = NativePlan();
  p.limits.cpus = 1;
  RunResult r = MustRun(p, {"/bin/sh", "-c",
                            "nproc; python3 -c 'import os; print(len(os.sched_getaffinity(0)))'"});
  EXPECT_EQ(r.stdout_stream.data, "1\n1\n") << r.stderr_stream.data;
}

TEST_F(NativeTest, EachLimitEndsTheRunWithItsVerdict) {
  const plan::Plan p = NativePlan();
  RunResult cpu = MustRun(p, {"/bin/sh", "-c", "while :; do :; done"});
  EXPECT_EQ(cpu.limit, LimitHit::kCpuTime) << cpu.limit_detail;
  EXPECT_GE(cpu.cpu_ns, p.limits.cpu_time_ns);

  plan::Plan slow = p;
  slow.limits.wall_time_ns = 1'000'000'000ull;
  RunResult wall = MustRun(slow, {"/bin/sleep", "30"});
  EXPECT_EQ(wall.limit, LimitHit::kWallTime) << wall.limit_detail;
  EXPECT_LT(wall.wall_ns, 5'000'000'000ull);

  RunResult mem = MustRun(p, {"/usr/bin/python3", "-c", "x = bytearray(400 << 20)\nprint(1)"});
  EXPECT_EQ(mem.limit, LimitHit::kMemory) << mem.limit_detail;
  EXPECT_EQ(mem.term_signal, SIGKILL);

  RunResult out = MustRun(p, {"/bin/sh", "-c", "yes"});
  EXPECT_EQ(out.limit, LimitHit::kOutput) << out.limit_detail;
  EXPECT_TRUE(out.stdout_stream.truncated);
  EXPECT_EQ(out.stdout_stream.data.size(), p.limits.output_bytes);

  RunResult pids = MustRun(p, {"/usr/bin/python3", "-c",
                               "import os, time\nn = 0\ntry:\n  while True:\n"
                               "    if os.fork() == 0:\n      time.sleep(3); os._exit(0)\n"
                               "    n += 1\nexcept OSError as e:\n  print('blocked', n)"});
  EXPECT_EQ(pids.exit_code, 0);
  EXPECT_EQ(pids.limit, LimitHit::kPids) << pids.limit_detail;
  // `pids` tasks in all, the program included.
  EXPECT_EQ(pids.stdout_stream.data, "blocked " + std::to_string(p.limits.pids - 1) + "\n");

  // RLIMIT_FSIZE below the 16 MiB /tmp. The program is pid 1 of its namespace (as under the other
  // backends), to which the kernel does not deliver SIGXFSZ: the write fails with EFBIG instead.
  plan::Plan small_files = p;
  small_files.limits.disk_bytes = 4ull << 20;
  RunResult disk =
      MustRun(small_files, {"/bin/sh", "-c", "exec head -c 8000000 /dev/zero > /tmp/big"});
  EXPECT_NE(disk.exit_code, 0);
  EXPECT_THAT(disk.stderr_stream.data, HasSubstr("File too large"));
  RunResult full = MustRun(p, {"/bin/sh", "-c", "head -c 8000000 /dev/zero > /data/out/big"});
  EXPECT_NE(full.exit_code, 0);
  EXPECT_EQ(full.limit, LimitHit::kDisk) << full.limit_detail;

  RunResult files = MustRun(p, {"/usr/bin/python3", "-c",
                                "import os\nfds = []\ntry:\n  while True: fds.append(os.open("
                                "'/dev/null', os.O_RDONLY))\nexcept OSError as e: print(e.errno)"});
  EXPECT_EQ(files.stdout_stream.data, "24\n");  // EMFILE inside only
}

TEST_F(NativeTest, StdinIsFedTheInputIsReadOnlyAndOutputsAreCollected) {
  safex::testing::TempDir in;
  in.Write("data.txt", "from the caller\n");
  chmod(in.path().c_str(), 0755);
  chmod(in.Join("data.txt").c_str(), 0644);
  plan::Plan p = NativePlan();
  p.mounts.push_back(Input("/data/in"));
  std::map<std::string, std::string> collected;
  auto collect = [&](const plan::Mount& m, int dirfd) {
    int fd = openat(dirfd, "r.txt", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[64];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    collected[m.target] = std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
  };
  auto r = Run(p,
               {"/bin/sh", "-c",
                "cat; cat /data/in/data.txt; echo x >> /data/in/data.txt || echo input-ro; "
                "touch /x || echo root-ro; echo result > /data/out/r.txt"},
               std::string("from stdin\n"), collect, in.path());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_stream.data;
  EXPECT_EQ(r->stdout_stream.data, "from stdin\nfrom the caller\ninput-ro\nroot-ro\n");
  EXPECT_EQ(collected["/data/out"], "result\n");
  std::ifstream host(in.Join("data.txt"));
  std::string text((std::istreambuf_iterator<char>(host)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "from the caller\n");
}

TEST_F(NativeTest, AMissingProgramIs127AndANonExecutableOne126) {
  RunResult missing = MustRun(NativePlan(), {"definitely-not-a-command"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_THAT(missing.backend_error, HasSubstr("No such file"));
  RunResult elsewhere = MustRun(NativePlan(), {"/etc/hostname"});
  EXPECT_EQ(elsewhere.exit_code, 127);  // the sandbox's /etc is its own: no such file there
  RunResult not_exec = MustRun(NativePlan(), {"/etc/passwd"});
  EXPECT_EQ(not_exec.exit_code, 126);
  RunResult dir = MustRun(NativePlan(), {"/usr"});
  EXPECT_EQ(dir.exit_code, 126);
}

TEST_F(NativeTest, UntrustedPlansAreRefusedBeforeAnythingExists) {
  plan::Plan p = NativePlan();
  p.trust = plan::Trust::kUntrusted;
  RunRequest req;
  req.run_id = NextNativeRunId();
  req.argv = {"/bin/true"};
  Status check = driver_->CheckRequest(p, req);
  EXPECT_EQ(check.code(), Status::Code::kPermissionDenied);
  EXPECT_THAT(check.message(), HasSubstr("untrusted"));
  auto r = driver_->Run(p, req);
  EXPECT_FALSE(r.ok());
}

TEST_F(NativeTest, ABindSourceThatResolvesIntoAProtectedPathIsRefused) {
  safex::testing::TempDir t;
  ASSERT_EQ(symlink("/etc", t.Join("innocent").c_str()), 0);
  plan::Plan p = NativePlan();
  plan::Mount m = BindRo(t.Join("innocent"));
  m.target = "/opt/tool";
  p.mounts.push_back(m);
  auto r = Run(p, {"/bin/true"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("protected host path"));
}

TEST_F(NativeTest, LandlockDeniesWritesTheMountsWouldAllowAndItsAbsenceIsSaid) {
  // /proc is mounted read-write (as it must be for a process's own /proc/self files); Landlock
  // grants no write below it.
  const std::vector<std::string> argv = {
      "/bin/sh", "-c", "echo renamed > /proc/self/comm && echo wrote || echo denied"};
  RunResult with = MustRun(NativePlan(), argv);
  if (driver_->landlock_abi() > 0) {
    EXPECT_EQ(with.stdout_stream.data, "denied\n");
    EXPECT_THAT(with.backend_mode, HasSubstr("landlock=abi"));
  }
  // The fallback, forced: the run says so, and the write the mounts allow goes through.
  NativeOptions o;
  o.landlock_abi = 0;
  auto without = MakeDriver(o);
  ASSERT_TRUE(without->Probe().ok());
  auto r = Run(NativePlan(), argv, std::nullopt, nullptr, "", without.get());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_stream.data, "wrote\n");
  EXPECT_THAT(r->backend_mode, HasSubstr("landlock=none"));
  EXPECT_EQ(ByName(r->enforcement)["landlock"].observed, "none");
  // A host that requires Landlock refuses to run without it.
  o.settings.require_landlock = true;
  auto strict = MakeDriver(o);
  Status probe = strict->Probe();
  EXPECT_EQ(probe.code(), Status::Code::kUnavailable);
  EXPECT_THAT(probe.message(), HasSubstr("Landlock"));
  EXPECT_FALSE(Run(NativePlan(), {"/bin/true"}, std::nullopt, nullptr, "", strict.get()).ok());
}

// bpf (321) fails with EPERM; kexec_load (246) kills the program.
TEST_F(NativeTest, TheSyscallRulesBite) {
  RunResult r =
      MustRun(NativePlan(), {"/usr/bin/python3", "-c",
                             "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                             "print(libc.syscall(321, 0, 0, 0), ctypes.get_errno(), flush=True)\n"
                             "libc.syscall(246, 0, 0, 0, 0)\nprint('survived')"});
  EXPECT_EQ(r.stdout_stream.data, "-1 1\n");
  EXPECT_EQ(r.term_signal, SIGSYS);
}

}  // namespace
}  // namespace safex::drivers::testing
