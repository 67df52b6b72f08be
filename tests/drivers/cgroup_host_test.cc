// drivers/cgroup on this host's real cgroups (v1 here, v2 on modern hosts): creation under our
// own subtree with limits, accounting of a real process, OOM counting, kill-and-remove. Root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "drivers/cgroup/cgroup.h"
#include "tests/support/leak_check.h"
#include "tests/support/test_support.h"

namespace safex::drivers::cgroup {
namespace {

using namespace std::chrono_literals;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TestName(const char* what) {
  return std::string("t-") + what + "-" + std::to_string(getpid());
}

// Moves `pid` into every directory of the cgroup.
void Enter(const RunCgroup& cg, pid_t pid) {
  for (const std::string& d : cg.dirs()) {
    std::ofstream(d + "/cgroup.procs") << pid << std::flush;
  }
}

class CgroupHostTest : public safex::testing::LeakCheckedTest {};

TEST_F(CgroupHostTest, DetectsThisHostAndIsUsable) {
  SAFEX_REQUIRE_ROOT();
  auto host = CgroupHost::Detect();
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_FALSE(host->HierarchyDirs().empty());
  if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
    EXPECT_EQ(host->version(), Version::kV2);
  } else {
    EXPECT_EQ(host->version(), Version::kV1);
  }
  Status st = host->CheckUsable("safex");
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST_F(CgroupHostTest, LimitsAccountingAndRemoval) {
  SAFEX_REQUIRE_ROOT();
  auto host = CgroupHost::Detect();
  ASSERT_TRUE(host.ok());
  Limits l;
  l.memory_bytes = 64 << 20;
  l.pids_max = 50;
  l.cpus = 1;
  std::string name = TestName("acct");
  auto rc = host->CreateRun("safex", name, l);
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->oci_path(), "/safex/" + name);
  for (const std::string& d : rc->dirs()) {
    EXPECT_EQ(access(d.c_str(), F_OK), 0) << d;
    EXPECT_EQ(d.find("/safex/" + name), d.size() - name.size() - 7) << "outside our subtree: " << d;
  }
  if (host->version() == Version::kV1) {
    EXPECT_EQ(ReadAll("/sys/fs/cgroup/memory/safex/" + name + "/memory.limit_in_bytes"),
              std::to_string(64 << 20) + "\n");
    EXPECT_EQ(ReadAll("/sys/fs/cgroup/pids/safex/" + name + "/pids.max"), "50\n");
    EXPECT_EQ(ReadAll("/sys/fs/cgroup/cpu/safex/" + name + "/cpu.cfs_quota_us"), "100000\n");
  } else {
    EXPECT_EQ(ReadAll("/sys/fs/cgroup/safex/" + name + "/memory.max"),
              std::to_string(64 << 20) + "\n");
  }

  // A real process spinning in it: CPU is accounted; Destroy kills it.
  SpawnOptions so;
  // b'x' * n writes every page (bytearray(n) is calloc'ed: untouched zero pages are never
  // charged, and the peak then depended on the interpreter's own pages).
  so.argv = {"/usr/bin/python3", "-c",
             "import time\ntime.sleep(0.3)\nb = b'x' * (16 << 20)\nwhile True: pass"};
  auto child = Subprocess::Spawn(so);
  ASSERT_TRUE(child.ok());
  Enter(*rc, child->pid());
  auto procs = rc->Procs();
  ASSERT_TRUE(procs.ok());
  EXPECT_NE(std::find(procs->begin(), procs->end(), child->pid()), procs->end());
  // Accounting starts when the process joins (v1 does not move earlier charges with it).
  auto cpu = rc->CpuUsageNs();
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  for (int i = 0; i < 100 && *cpu < 100'000'000u; ++i) {
    std::this_thread::sleep_for(100ms);
    cpu = rc->CpuUsageNs();
  }
  EXPECT_GE(*cpu, 100'000'000u) << "a spinning process was not accounted";
  auto peak = rc->PeakMemoryBytes();
  ASSERT_TRUE(peak.ok());
  EXPECT_GE(*peak, 16u << 20) << "a 16 MiB allocation was not accounted";
  EXPECT_EQ(*rc->OomKills(), 0u);

  Status st = rc->Destroy();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(rc->valid());
  auto ws = child->Wait(Subprocess::Clock::now() + 5s);
  ASSERT_TRUE(ws.ok() && ws->has_value());
  EXPECT_EQ((*ws)->signal, SIGKILL) << "Destroy must kill what is left";
  for (const std::string& h : host->HierarchyDirs()) {
    EXPECT_NE(access((h + "/safex/" + name).c_str(), F_OK), 0);
  }
}

TEST_F(CgroupHostTest, OomKillIsCountedAtTheMemoryLimit) {
  SAFEX_REQUIRE_ROOT();
  auto host = CgroupHost::Detect();
  ASSERT_TRUE(host.ok());
  Limits l;
  l.memory_bytes = 32 << 20;
  auto rc = host->CreateRun("safex", TestName("oom"), l);
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  SpawnOptions so;
  so.argv = {"/usr/bin/python3", "-c",
             "import time\ntime.sleep(0.3)\nb=[]\nfor i in range(64): b.append(bytearray(4<<20))"};
  auto child = Subprocess::Spawn(so);
  ASSERT_TRUE(child.ok());
  Enter(*rc, child->pid());
  auto ws = child->Wait(Subprocess::Clock::now() + 20s);
  ASSERT_TRUE(ws.ok() && ws->has_value());
  EXPECT_EQ((*ws)->signal, SIGKILL);
  auto oom = rc->OomKills();
  ASSERT_TRUE(oom.ok()) << oom.status().ToString();
  EXPECT_GE(*oom, 1u);
  EXPECT_TRUE(rc->Destroy().ok());
}

TEST_F(CgroupHostTest, PidsLimitHitsAreCounted) {
  SAFEX_REQUIRE_ROOT();
  auto host = CgroupHost::Detect();
  ASSERT_TRUE(host.ok());
  Limits l;
  l.pids_max = 5;
  auto rc = host->CreateRun("safex", TestName("pids"), l);
  ASSERT_TRUE(rc.ok());
  SpawnOptions so;
  so.argv = {"/bin/sh", "-c", "sleep 0.3; for i in 1 2 3 4 5 6 7 8; do sleep 2 & done; wait"};
  auto child = Subprocess::Spawn(so);
  ASSERT_TRUE(child.ok());
  Enter(*rc, child->pid());
  child->Wait(Subprocess::Clock::now() + 10s).ok();
  auto hits = rc->PidsLimitHits();
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_GE(*hits, 1u);
  EXPECT_TRUE(rc->Destroy().ok());
}

}  // namespace
}  // namespace safex::drivers::cgroup
