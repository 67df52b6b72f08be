// The native run's cgroup step on fake cgroup trees (tests/drivers/fake_cgroup_tree.h), v2 and a
// v1 hybrid: one cgroup per hierarchy below the delegated parent, named for the run, with the
// plan's memory, CPU and process limits (the process limit exact, counted by pids.events).
#include <gtest/gtest.h>

#include "drivers/native/run_steps.h"
#include "tests/drivers/fake_cgroup_tree.h"
#include "tests/native/native_test_fixture.h"

namespace safex::drivers::native {
namespace {

using cgroup::FakeKernelFs;
using cgroup::TempTree;

struct Made {
  std::map<std::string, std::string> writes;
  std::vector<std::string> dirs;
};

Made MakeCgroupOn(bool v2) {
  TempTree t;
  FakeKernelFs fs(v2);
  fs.set_root_len(t.path().size());
  if (v2) {
    cgroup::LayOutV2(t.path());
  } else {
    cgroup::LayOutV1Hybrid(t.path());
  }
  auto host = cgroup::CgroupHost::Detect(t.path(), &fs);
  EXPECT_TRUE(host.ok()) << host.status().ToString();
  if (!host.ok()) return {};
  const plan::Plan p = testing::NativePlan();
  RunRequest req;
  req.run_id = "r1";
  NativeOptions o;
  const RunContext c{p, req, o};
  RunState s;
  Status st = CreateCgroup(c, *host, s);
  EXPECT_TRUE(st.ok()) << st.ToString();
  Made m;
  for (const auto& [path, value] : fs.writes) m.writes[path.substr(t.path().size())] = value;
  for (const std::string& d : s.cg.dirs()) m.dirs.push_back(d.substr(t.path().size()));
  EXPECT_TRUE(s.cg.Destroy().ok());
  return m;
}

TEST(NativeCgroupStepTest, V2OneCgroupWithThePlansLimits) {
  const Made m = MakeCgroupOn(true);
  EXPECT_EQ(m.dirs, std::vector<std::string>{"/safex/native-r1"});
  const plan::Limits lim = testing::NativePlan().limits;
  EXPECT_EQ(m.writes.at("/safex/native-r1/memory.max"), std::to_string(lim.memory_bytes));
  EXPECT_EQ(m.writes.at("/safex/native-r1/pids.max"), std::to_string(lim.pids));
  EXPECT_EQ(m.writes.at("/safex/native-r1/cpu.max"), "100000 100000");
}

TEST(NativeCgroupStepTest, V1HybridOneCgroupPerHierarchyWithThePlansLimits) {
  const Made m = MakeCgroupOn(false);
  EXPECT_EQ(m.dirs.size(), 5u);  // cpu,cpuacct cpuset freezer memory pids
  const plan::Limits lim = testing::NativePlan().limits;
  EXPECT_EQ(m.writes.at("/memory/safex/native-r1/memory.limit_in_bytes"),
            std::to_string(lim.memory_bytes));
  EXPECT_EQ(m.writes.at("/pids/safex/native-r1/pids.max"), std::to_string(lim.pids));
  EXPECT_EQ(m.writes.at("/cpu,cpuacct/safex/native-r1/cpu.cfs_quota_us"), "100000");
}

}  // namespace
}  // namespace safex::drivers::native
