// The native sandbox's mount script, step by step, for a plan of the trusted-tool shape: what is
// mounted where, in which order, with which flags.
#include "drivers/native/mount_script.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>

#include "tests/drivers/test_plans.h"

namespace safex::drivers::native {
namespace {

using ::testing::ElementsAre;

plan::Plan ToolPlan() {
  plan::Plan p = testing::BasePlan();
  p.trust = plan::Trust::kTrusted;
  p.backend = plan::Backend::kNative;
  p.limits.disk_bytes = 32ull << 20;
  p.mounts = {testing::BindRo("/usr"), testing::Tmpfs("/tmp", 8ull << 20),
              testing::Input("/data/in"), testing::Output("/data/out", 4ull << 20)};
  return p;
}

std::vector<std::string> Steps(const std::vector<MountOp>& ops) {
  std::vector<std::string> out;
  for (const MountOp& op : ops) out.push_back(op.what);
  return out;
}

TEST(MountScriptTest, TheStepsComeInTheirOrderWithTheirFlags) {
  const plan::Plan p = ToolPlan();
  MountScriptInput in;
  in.plan = &p;
  in.root = "/run/safex/native/r1/root";
  in.source_fds = {10, -1, 11, 12};
  in.host_uid = 1879048200;
  in.host_gid = 1879048200;
  const std::vector<MountOp> ops = BuildMountScript(in);
  EXPECT_THAT(
      Steps(ops),
      ElementsAre("make every mount private", "bind the run's root at / ro nosuid nodev",
                  "proc at /proc rw nosuid nodev noexec (the run's own pid namespace)",
                  "bind /proc/sys at /proc/sys ro nosuid nodev noexec",
                  "tmpfs at /dev rw nosuid noexec (size=65536,nr_inodes=64,mode=0755)",
                  "mknod /dev/null c 1 3", "mknod /dev/zero c 1 5", "mknod /dev/full c 1 7",
                  "mknod /dev/random c 1 8", "mknod /dev/urandom c 1 9",
                  "symlink /dev/fd -> /proc/self/fd", "symlink /dev/stdin -> /proc/self/fd/0",
                  "symlink /dev/stdout -> /proc/self/fd/1",
                  "symlink /dev/stderr -> /proc/self/fd/2", "mkdir /dev/shm",
                  "tmpfs at /dev/shm rw nosuid nodev noexec "
                  "(size=33554432,nr_inodes=8192,mode=0700,uid=1879048200,gid=1879048200)",
                  "bind /usr at /usr ro nosuid nodev",
                  "tmpfs at /tmp rw nosuid nodev noexec "
                  "(size=8388608,nr_inodes=2048,mode=0700,uid=1879048200,gid=1879048200)",
                  "bind the input at /data/in ro nosuid nodev noexec",
                  "bind the output tmpfs at /data/out rw nosuid nodev noexec",
                  "remount /dev ro nosuid noexec"));
}

TEST(MountScriptTest, PlanMountsAreAttachedFromTheParentsClonesBelowTheRoot) {
  const plan::Plan p = ToolPlan();
  MountScriptInput in;
  in.plan = &p;
  in.root = "/r";
  in.source_fds = {10, -1, 11, 12};
  const std::vector<MountOp> ops = BuildMountScript(in);
  std::vector<std::pair<int, std::string>> attached;
  for (const MountOp& op : ops) {
    if (op.kind == MountOp::Kind::kAttach) attached.emplace_back(op.source_fd, op.target);
    // Nothing is mounted outside the new root but the private propagation of "/" itself.
    if (op.kind != MountOp::Kind::kMakePrivate) {
      EXPECT_TRUE(op.target == "/r" || op.target.rfind("/r/", 0) == 0) << op.what;
    }
  }
  EXPECT_THAT(attached, ElementsAre(std::make_pair(10, std::string("/r/usr")),
                                    std::make_pair(11, std::string("/r/data/in")),
                                    std::make_pair(12, std::string("/r/data/out"))));
}

TEST(MountScriptTest, WritableMountsAreNeverSuidOrDevicesAndExecutableOnlyWhereThePlanSays) {
  plan::Plan p = ToolPlan();
  plan::Mount rw = testing::BindRo("/srv/tool-cache");
  rw.read_only = false;
  rw.nosuid = false;  // a writable bind is nosuid and nodev whatever the plan field says
  rw.nodev = false;
  rw.noexec = false;
  p.mounts.push_back(rw);
  MountScriptInput in;
  in.plan = &p;
  in.root = "/r";
  in.source_fds = {10, -1, 11, 12, 13};
  for (const MountOp& op : BuildMountScript(in)) {
    if (op.target == "/r/srv/tool-cache") {
      EXPECT_EQ(op.flags & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC), MS_NOSUID | MS_NODEV);
    }
    if (op.target == "/r/tmp") {
      EXPECT_NE(op.flags & MS_NOEXEC, 0u);
    }
    if (op.kind == MountOp::Kind::kMknod) {
      EXPECT_EQ(major(op.dev), 1u) << op.what;  // memory devices only
      EXPECT_EQ(op.mode, 0666u);
    }
  }
}

TEST(MountScriptTest, TheInfrastructureMountsAreWhatTheEvidenceExpects) {
  EXPECT_THAT(InfrastructureMountLines(),
              ElementsAre("/ ro", "/proc rw noexec", "/proc/sys ro noexec", "/dev ro noexec",
                          "/dev/shm rw noexec"));
}

}  // namespace
}  // namespace safex::drivers::native
