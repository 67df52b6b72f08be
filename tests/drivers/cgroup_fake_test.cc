// drivers/cgroup against a temporary directory laid out like a cgroup v2 tree (and like a v1
// hybrid), with a CgroupFs that imitates the kernel: mkdir creates the control files of the
// controllers the parent delegates, rmdir fails with EBUSY while processes remain, cgroup.kill
// empties the cgroup. Unprivileged; runs under ASan.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "drivers/cgroup/cgroup.h"
#include "drivers/enforcement.h"
#include "drivers/run_dir.h"
#include "tests/drivers/fake_cgroup_tree.h"

namespace safex::drivers::cgroup {
namespace {

// A temporary tree laid out like a cgroup v2 mount, with the fake kernel over it.
class CgroupV2FakeTree : public testing::Test {
 protected:
  CgroupV2FakeTree() { LayOutV2(t.path()); }
  // The host as safex detects it over the tree.
  Result<CgroupHost> Detect() { return CgroupHost::Detect(t.path(), &fs); }

  TempTree t;
  FakeKernelFs fs{true};
};

// The same laid out like a v1 hybrid (tests/drivers/fake_cgroup_tree.h).
class CgroupV1FakeTree : public testing::Test {
 protected:
  CgroupV1FakeTree() {
    fs.set_root_len(t.path().size());
    LayOutV1Hybrid(t.path());
  }
  Result<CgroupHost> Detect() { return CgroupHost::Detect(t.path(), &fs); }

  TempTree t;
  FakeKernelFs fs{false};
};

// The run's evidence read back (drivers/enforcement.h) on v2; v1's is among the v1 tests.
class CgroupReadBack : public CgroupV2FakeTree {};

TEST_F(CgroupV2FakeTree, DetectsV2) {
  auto host = Detect();
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ(host->version(), Version::kV2);
  EXPECT_EQ(host->HierarchyDirs(), std::vector<std::string>{t.path()});
}

TEST_F(CgroupV2FakeTree, CreatesUnderOwnSubtreeDelegatesControllersAndSetsLimits) {
  auto host = Detect();
  ASSERT_TRUE(host.ok());
  Limits l;
  l.memory_bytes = 128 << 20;
  l.pids_max = 600;
  l.cpus = 2;
  {
    auto rc = host->CreateRun("safex", "run-1", l);
    ASSERT_TRUE(rc.ok()) << rc.status().ToString();
    const std::string dir = t.path() + "/safex/run-1";
    EXPECT_EQ(rc->oci_path(), "/safex/run-1");
    EXPECT_EQ(rc->dirs(), std::vector<std::string>{dir});
    // Controllers were delegated from the root down to safex/, so the leaf got its files.
    EXPECT_EQ(ReadAll(t.path() + "/cgroup.subtree_control"), "cpu memory pids");
    EXPECT_EQ(ReadAll(t.path() + "/safex/cgroup.subtree_control"), "cpu memory pids");
    EXPECT_EQ(ReadAll(dir + "/memory.max"), std::to_string(128 << 20));
    EXPECT_EQ(ReadAll(dir + "/memory.swap.max"), "0");
    EXPECT_EQ(ReadAll(dir + "/pids.max"), "600");
    EXPECT_EQ(ReadAll(dir + "/cpu.max"), "200000 100000");

    // Accounting reads.
    WriteAll(dir + "/cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n");
    WriteAll(dir + "/memory.peak", "4096\n");
    WriteAll(dir + "/memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n");
    WriteAll(dir + "/pids.events", "max 5\n");
    EXPECT_EQ(*rc->CpuUsageNs(), 1500000u);
    EXPECT_EQ(*rc->PeakMemoryBytes(), 4096u);
    EXPECT_EQ(*rc->OomKills(), 2u);
    EXPECT_EQ(*rc->PidsLimitHits(), 5u);

    // A leftover "process" keeps it busy until cgroup.kill empties it.
    WriteAll(dir + "/cgroup.procs", "4242\n4243\n");
    auto procs = rc->Procs();
    ASSERT_TRUE(procs.ok());
    EXPECT_EQ(*procs, (std::vector<pid_t>{4242, 4243}));
  }  // RAII: destroyed here
  EXPECT_NE(access((t.path() + "/safex/run-1").c_str(), F_OK), 0) << "run cgroup not removed";
  EXPECT_EQ(access((t.path() + "/safex").c_str(), F_OK), 0) << "shared parent must stay";
  EXPECT_GE(fs.kills, 1) << "leftovers were not killed before rmdir";
}

TEST_F(CgroupV2FakeTree, ALeftoverIsNeverAdopted) {
  auto host = Detect();
  ASSERT_TRUE(host.ok());
  auto first = host->CreateRun("safex", "dup", {});
  ASSERT_TRUE(first.ok());
  auto second = host->CreateRun("safex", "dup", {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kFailedPrecondition);
  // The refused attempt must not have removed the first one's directory.
  EXPECT_EQ(access((t.path() + "/safex/dup").c_str(), F_OK), 0);
}

TEST_F(CgroupV2FakeTree, NestedParentAndBadNames) {
  auto host = Detect();
  ASSERT_TRUE(host.ok());
  auto rc = host->CreateRun("system.slice/safex.service/runs", "r1", {});
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->oci_path(), "/system.slice/safex.service/runs/r1");
  EXPECT_EQ(ReadAll(t.path() + "/system.slice/safex.service/runs/cgroup.subtree_control"),
            "cpu memory pids");
  for (const char* bad : {"../x", "a/b", "", ".", "a b"}) {
    EXPECT_EQ(host->CreateRun("safex", bad, {}).status().code(), Status::Code::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(host->CreateRun("/abs", "x", {}).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(host->CreateRun("a/../b", "x", {}).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(CgroupV2FakeTree, DestroyRetriesWhileBusyThenReportsIt) {
  // A kernel whose cgroup.kill does nothing: the cgroup stays busy.
  class StuckFs : public FakeKernelFs {
   public:
    StuckFs() : FakeKernelFs(true) {}
    int WriteFile(const std::string& path, std::string_view data) override {
      if (path.ends_with("/cgroup.kill")) return 0;
      return FakeKernelFs::WriteFile(path, data);
    }
  } stuck;
  auto host = CgroupHost::Detect(t.path(), &stuck);
  ASSERT_TRUE(host.ok());
  auto rc = host->CreateRun("safex", "busy", {});
  ASSERT_TRUE(rc.ok());
  WriteAll(t.path() + "/safex/busy/cgroup.procs", "77\n");
  Status st = rc->Destroy(std::chrono::milliseconds(100));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Device or resource busy"), std::string::npos) << st.ToString();
  EXPECT_GT(stuck.rmdirs, 2) << "rmdir was not retried";
  EXPECT_TRUE(rc->valid()) << "a cgroup that could not be removed must stay owned";
  // Once it empties, a later Destroy succeeds.
  WriteAll(t.path() + "/safex/busy/cgroup.procs", "");
  EXPECT_TRUE(rc->Destroy().ok());
  EXPECT_FALSE(rc->valid());
}

TEST_F(CgroupV2FakeTree, CheckUsableNamesMissingControllers) {
  WriteAll(t.path() + "/cgroup.controllers", "cpu io\n");
  auto host = Detect();
  ASSERT_TRUE(host.ok());
  Status st = host->CheckUsable("safex");
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_NE(st.message().find("memory, pids"), std::string::npos) << st.ToString();
}

TEST_F(CgroupV2FakeTree, CheckUsableCreatesAndRemovesAProbe) {
  auto host = Detect();
  ASSERT_TRUE(host.ok());
  EXPECT_TRUE(host->CheckUsable("safex").ok());
  EXPECT_EQ(access((t.path() + "/safex").c_str(), F_OK), 0);
  EXPECT_EQ(fs.mkdirs, 2);  // safex, then the probe
  EXPECT_EQ(fs.rmdirs, 1);  // the probe only
  EXPECT_NE(fs.writes.count(t.path() + "/safex/" + "cgroup.subtree_control"), 0u);
}

TEST_F(CgroupV1FakeTree, OneCgroupPerHierarchyWithCpusetFilledAndLimits) {
  auto host = Detect();
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ(host->version(), Version::kV1);
  EXPECT_EQ(
      host->HierarchyDirs(),
      (std::vector<std::string>{t.path() + "/cpu,cpuacct", t.path() + "/cpuset",
                                t.path() + "/freezer", t.path() + "/memory", t.path() + "/pids"}));
  Limits l;
  l.memory_bytes = 1 << 26;
  l.pids_max = 100;
  l.cpus = 1;
  auto rc = host->CreateRun("safex", "r", l);
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->dirs().size(), 5u);
  EXPECT_EQ(ReadAll(t.path() + "/memory/safex/r/memory.limit_in_bytes"), std::to_string(1 << 26));
  EXPECT_EQ(ReadAll(t.path() + "/memory/safex/r/memory.memsw.limit_in_bytes"),
            std::to_string(1 << 26));
  EXPECT_EQ(ReadAll(t.path() + "/pids/safex/r/pids.max"), "100");
  EXPECT_EQ(ReadAll(t.path() + "/cpu,cpuacct/safex/r/cpu.cfs_quota_us"), "100000");
  EXPECT_EQ(ReadAll(t.path() + "/cpuset/safex/cpuset.cpus"), "0-3");
  EXPECT_EQ(ReadAll(t.path() + "/cpuset/safex/r/cpuset.cpus"), "0-3");
  EXPECT_EQ(ReadAll(t.path() + "/cpuset/safex/r/cpuset.mems"), "0");
  WriteAll(t.path() + "/cpu,cpuacct/safex/r/cpuacct.usage", "123456789\n");
  WriteAll(t.path() + "/memory/safex/r/memory.oom_control",
           "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
  EXPECT_EQ(*rc->CpuUsageNs(), 123456789u);
  EXPECT_EQ(*rc->OomKills(), 1u);

  // v1 has no cgroup.kill: members are killed one by one (pinned by pidfd in the real fs).
  WriteAll(t.path() + "/pids/safex/r/cgroup.procs", "11\n12\n");
  EXPECT_TRUE(rc->KillAll().ok());
  EXPECT_EQ(fs.killed, (std::vector<pid_t>{11, 12}));
  EXPECT_TRUE(rc->Destroy().ok());
  for (const std::string& h : host->HierarchyDirs()) {
    EXPECT_NE(access((h + "/safex/r").c_str(), F_OK), 0) << h;
  }
}

// A waiting pooled sandbox is frozen (no CPU while it waits) and thawed for its run; a kill thaws
// first, since on v1 a frozen task does not act on a SIGKILL until it is thawed.
TEST_F(CgroupV1FakeTree, FreezesThawsAndThawsBeforeKilling) {
  auto host = Detect();
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  auto rc = host->CreateRun("safex", "r", {});
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  const std::string state = t.path() + "/freezer/safex/r/freezer.state";
  ASSERT_TRUE(rc->SetFrozen(true).ok());
  EXPECT_EQ(ReadAll(state), "FROZEN");
  ASSERT_TRUE(rc->SetFrozen(false).ok());
  EXPECT_EQ(ReadAll(state), "THAWED");
  ASSERT_TRUE(rc->SetFrozen(true).ok());
  WriteAll(t.path() + "/pids/safex/r/cgroup.procs", "11\n");
  fs.ops.clear();
  EXPECT_TRUE(rc->KillAll().ok());
  ASSERT_GE(fs.ops.size(), 2u);
  EXPECT_EQ(fs.ops[0], "write freezer.state THAWED");
  EXPECT_EQ(fs.ops[1], "kill 11");
  EXPECT_TRUE(rc->Destroy().ok());
}

TEST_F(CgroupV2FakeTree, FreezesWithCgroupFreeze) {
  auto host = Detect();
  ASSERT_TRUE(host.ok());
  auto rc = host->CreateRun("safex", "r", {});
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  ASSERT_TRUE(rc->SetFrozen(true).ok());
  EXPECT_EQ(ReadAll(t.path() + "/safex/r/cgroup.freeze"), "1");
  ASSERT_TRUE(rc->SetFrozen(false).ok());
  EXPECT_EQ(ReadAll(t.path() + "/safex/r/cgroup.freeze"), "0");
}

// Without a freezer hierarchy nothing is written, and the caller is told.
TEST_F(CgroupV1FakeTree, NoFreezerIsAFailedPrecondition) {
  safex::RemoveTree(t.path() + "/freezer").ok();
  auto host = Detect();
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  auto rc = host->CreateRun("safex", "r", {});
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  Status st = rc->SetFrozen(true);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_TRUE(rc->KillAll().ok());
}

TEST(CgroupFakeTree, NoCgroupsAtAllIsUnavailable) {
  TempTree t;
  FakeKernelFs fs(true);
  EXPECT_EQ(CgroupHost::Detect(t.path(), &fs).status().code(), Status::Code::kUnavailable);
}

// ---- read-back (the run's evidence, drivers/enforcement.h) --------------------------------

const EnforcedField* Field(const Enforcement& e, const std::string& name) {
  for (const EnforcedField& f : e.fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST_F(CgroupReadBack, WhatWasWrittenMatchesAndNamesItsControlFile) {
  auto host = Detect();
  ASSERT_TRUE(host.ok());
  Limits l;
  l.memory_bytes = 128 << 20;
  l.pids_max = 600;
  l.cpus = 2;
  auto rc = host->CreateRun("safex", "run-1", l);
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  // The root has no limit files and the shared parent says "max": the run's own files decide.
  WriteAll(t.path() + "/safex/memory.max", "max\n");
  WriteAll(t.path() + "/safex/cpu.max", "max 100000\n");
  auto seen = rc->ReadEffectiveLimits();
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->memory_bytes, uint64_t{128} << 20);
  EXPECT_EQ(seen->pids_max, 600u);
  EXPECT_EQ(seen->cpu_millis, 2000u);
  EXPECT_EQ(seen->memory_source, t.path() + "/safex/run-1/memory.max");

  Enforcement e;
  CompareLimits(l, *rc, &e);
  ASSERT_EQ(e.fields.size(), 3u);
  EXPECT_FALSE(e.Differs()) << e.Differences();
  EXPECT_EQ(Field(e, "cgroup.memory_bytes")->state, EnforcedField::State::kMatches);
  EXPECT_EQ(Field(e, "cgroup.cpu_millis")->observed, "2000");
}

TEST_F(CgroupReadBack, AStricterAncestorIsWhatTheKernelEnforcesAndDiffers) {
  auto host = Detect();
  ASSERT_TRUE(host.ok());
  Limits l;
  l.memory_bytes = 256 << 20;
  l.pids_max = 600;
  l.cpus = 1;
  auto rc = host->CreateRun("safex", "run-2", l);
  ASSERT_TRUE(rc.ok());
  // The operator's delegated cgroup caps every sandbox at 64 MiB: a 256 MiB plan cannot hold.
  WriteAll(t.path() + "/safex/memory.max", std::to_string(64 << 20) + "\n");
  WriteAll(t.path() + "/safex/pids.max", "max\n");
  Enforcement e;
  CompareLimits(l, *rc, &e);
  ASSERT_TRUE(e.Differs());
  const EnforcedField* mem = Field(e, "cgroup.memory_bytes");
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->state, EnforcedField::State::kDiffers);
  EXPECT_EQ(mem->expected, std::to_string(256 << 20));
  EXPECT_EQ(mem->observed, std::to_string(64 << 20));
  EXPECT_NE(mem->source.find(t.path() + "/safex/memory.max"), std::string::npos) << mem->source;
  EXPECT_EQ(Field(e, "cgroup.pids_max")->state, EnforcedField::State::kMatches);
  EXPECT_NE(e.Differences().find("cgroup.memory_bytes: the plan asks for 268435456"),
            std::string::npos)
      << e.Differences();
}

TEST_F(CgroupReadBack, AMissingOrGarbledControlFileIsNotShownToHold) {
  auto host = Detect();
  ASSERT_TRUE(host.ok());
  Limits l;
  l.memory_bytes = 64 << 20;
  l.pids_max = 10;
  l.cpus = 1;
  auto rc = host->CreateRun("safex", "run-3", l);
  ASSERT_TRUE(rc.ok());
  const std::string dir = t.path() + "/safex/run-3";
  WriteAll(dir + "/pids.max", "lots\n");
  EXPECT_EQ(rc->ReadEffectiveLimits().status().code(), Status::Code::kDataLoss);
  Enforcement garbled;
  CompareLimits(l, *rc, &garbled);
  EXPECT_TRUE(garbled.Differs());
  ASSERT_EQ(garbled.fields.size(), 1u);
  EXPECT_EQ(garbled.fields[0].name, "cgroup");

  // A kernel without the cpu controller here (simulated: its control file is gone).
  WriteAll(dir + "/pids.max", "10\n");
  ASSERT_EQ(unlink((dir + "/cpu.max").c_str()), 0);
  Enforcement missing;
  CompareLimits(l, *rc, &missing);
  EXPECT_TRUE(missing.Differs());
  EXPECT_NE(missing.Differences().find("cpu.max"), std::string::npos) << missing.Differences();
}

TEST_F(CgroupV1FakeTree, ReadBackOfV1IsQuotaOverPeriodAndThePageCounterMaximumIsUnlimited) {
  // What a v1 root shows: no pids.max at the root, memory "unlimited" as the page counter's max.
  WriteAll(t.path() + "/memory/memory.limit_in_bytes", "9223372036854771712\n");
  WriteAll(t.path() + "/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  WriteAll(t.path() + "/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  auto host = Detect();
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  Limits l;
  l.memory_bytes = 1 << 26;
  l.pids_max = 100;
  l.cpus = 1;
  auto rc = host->CreateRun("safex", "r", l);
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  Enforcement e;
  CompareLimits(l, *rc, &e);
  EXPECT_FALSE(e.Differs()) << e.Differences();
  EXPECT_EQ(Field(e, "cgroup.cpu_millis")->observed, "1000");
  EXPECT_EQ(Field(e, "cgroup.memory_bytes")->observed, std::to_string(1 << 26));
}

}  // namespace
}  // namespace safex::drivers::cgroup
