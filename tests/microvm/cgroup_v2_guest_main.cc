// The cgroup v2 code path of drivers/cgroup, run for real: this static test binary is /init of a
// throwaway microVM (tests/microvm/cgroup_v2_in_guest_test.cc boots it). The build machine's
// cgroups are hybrid v1; the guest kernel gives us a pure v2 host with every controller, so the
// v2 branch of CgroupHost/RunCgroup meets a real kernel here rather than only the fake in
// tests/drivers/cgroup_fake_test.cc.
//
// Output goes to the serial console; the last line is "SAFEX-CGROUP-V2-RESULT: PASS" or "FAIL".
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "drivers/cgroup/cgroup.h"

namespace safex::drivers::cgroup {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// A child that waits on a pipe until it has been moved into `cg`, then runs `body` and exits 0.
template <typename F>
pid_t ChildIn(const RunCgroup& cg, F body) {
  int p[2];
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[1]);
    char c;
    if (read(p[0], &c, 1) != 1) _exit(3);
    body();
    _exit(0);
  }
  close(p[0]);
  std::ofstream(cg.dirs().front() + "/cgroup.procs") << pid << std::flush;
  (void)!write(p[1], "g", 1);
  close(p[1]);
  return pid;
}

int WaitStatus(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

class CgroupV2GuestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto h = CgroupHost::Detect("/sys/fs/cgroup");
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    host_.emplace(*h);
  }
  std::optional<CgroupHost> host_;
};

TEST_F(CgroupV2GuestTest, DetectsAPureV2Host) {
  EXPECT_EQ(host_->version(), Version::kV2);
  EXPECT_EQ(host_->HierarchyDirs(), (std::vector<std::string>{"/sys/fs/cgroup"}));
  EXPECT_TRUE(host_->CheckUsable("safex").ok());
}

TEST_F(CgroupV2GuestTest, CreateRunDelegatesControllersAndAppliesLimits) {
  Limits l;
  l.memory_bytes = 32u << 20;
  l.pids_max = 16;
  l.cpus = 1;
  auto cg = host_->CreateRun("safex", "limits", l);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ(cg->version(), Version::kV2);
  EXPECT_EQ(cg->oci_path(), "/safex/limits");
  ASSERT_EQ(cg->dirs().size(), 1u);
  const std::string dir = cg->dirs().front();
  EXPECT_EQ(dir, "/sys/fs/cgroup/safex/limits");
  std::string delegated = ReadFile("/sys/fs/cgroup/safex/cgroup.subtree_control");
  for (const char* c : {"memory", "pids", "cpu"}) {
    EXPECT_NE(delegated.find(c), std::string::npos) << delegated;
  }
  EXPECT_EQ(ReadFile(dir + "/memory.max"), "33554432");
  EXPECT_EQ(ReadFile(dir + "/pids.max"), "16");
  EXPECT_EQ(ReadFile(dir + "/cpu.max"), "100000 100000");
  // A leftover of the same name is never adopted.
  auto again = host_->CreateRun("safex", "limits", l);
  EXPECT_FALSE(again.ok());
  EXPECT_TRUE(cg->Destroy().ok());
  EXPECT_FALSE(cg->valid());
  struct stat st;
  EXPECT_NE(stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(cg->Destroy().ok());  // idempotent
}

TEST_F(CgroupV2GuestTest, OomKillsAndPeakMemoryAreCounted) {
  Limits l;
  l.memory_bytes = 16u << 20;
  auto cg = host_->CreateRun("safex", "oom", l);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  pid_t pid = ChildIn(*cg, [] {
    // Touch every page through a volatile pointer: an unused malloc+memset may be optimised away.
    const size_t n = 64u << 20;
    volatile char* p = static_cast<volatile char*>(malloc(n));
    for (size_t i = 0; p != nullptr && i < n; i += 4096) p[i] = 1;
  });
  int st = WaitStatus(pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << st;
  auto ooms = cg->OomKills();
  ASSERT_TRUE(ooms.ok()) << ooms.status().ToString();
  EXPECT_GE(*ooms, 1u);
  auto peak = cg->PeakMemoryBytes();
  ASSERT_TRUE(peak.ok());
  EXPECT_GE(*peak, 12u << 20);
  EXPECT_LE(*peak, 16u << 20);
  EXPECT_TRUE(cg->Destroy().ok());
}

TEST_F(CgroupV2GuestTest, PidsLimitHitsAreCountedAndKillAllEmptiesTheCgroup) {
  Limits l;
  l.pids_max = 4;
  auto cg = host_->CreateRun("safex", "pids", l);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  pid_t pid = ChildIn(*cg, [] {
    int failures = 0;
    for (int i = 0; i < 10; ++i) {
      pid_t c = fork();
      if (c == 0) {
        pause();
        _exit(0);
      }
      if (c < 0 && errno == EAGAIN) ++failures;
    }
    _exit(failures > 0 ? 0 : 1);
  });
  int st = WaitStatus(pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "no fork failed at pids.max";
  auto hits = cg->PidsLimitHits();
  ASSERT_TRUE(hits.ok());
  EXPECT_GT(*hits, 0u);
  auto procs = cg->Procs();
  ASSERT_TRUE(procs.ok());
  EXPECT_EQ(procs->size(), 3u);  // the orphaned grandchildren: pids.max 4, minus their parent
  EXPECT_TRUE(cg->KillAll().ok());
  for (int i = 0; i < 100; ++i) {  // the orphans are reaped by us (PID 1)
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    procs = cg->Procs();
    if (procs.ok() && procs->empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(procs.ok() && procs->empty());
  EXPECT_TRUE(cg->Destroy().ok());
}

TEST_F(CgroupV2GuestTest, CpuUsageIsAccounted) {
  auto cg = host_->CreateRun("safex", "cpu", Limits{});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  pid_t pid = ChildIn(*cg, [] {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    volatile uint64_t x = 0;
    while (std::chrono::steady_clock::now() < end) x = x + 1;
  });
  WaitStatus(pid);
  auto ns = cg->CpuUsageNs();
  ASSERT_TRUE(ns.ok());
  EXPECT_GE(*ns, 150'000'000u);
  EXPECT_TRUE(cg->Destroy().ok());
}

TEST_F(CgroupV2GuestTest, DestroyKillsWhatIsLeft) {
  auto cg = host_->CreateRun("safex", "leftover", Limits{});
  ASSERT_TRUE(cg.ok());
  pid_t pid = ChildIn(*cg, [] { pause(); });
  std::thread reaper([pid] { WaitStatus(pid); });
  EXPECT_TRUE(cg->Destroy().ok());
  reaper.join();
  EXPECT_FALSE(cg->valid());
}

}  // namespace
}  // namespace safex::drivers::cgroup

int main(int argc, char** argv) {
  mkdir("/dev", 0755);
  mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, nullptr);
  mkdir("/proc", 0755);
  mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mkdir("/sys", 0755);
  mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mkdir("/tmp", 01777);
  setvbuf(stdout, nullptr, _IONBF, 0);
  ::testing::InitGoogleTest(&argc, argv);
  GTEST_FLAG_SET(color, "no");  // the console is a tty; the host greps plain text
  int rc = RUN_ALL_TESTS();
  std::printf("\nSAFEX-CGROUP-V2-RESULT: %s\n", rc == 0 ? "PASS" : "FAIL");
  sync();
  reboot(RB_POWER_OFF);
  return rc;
}
