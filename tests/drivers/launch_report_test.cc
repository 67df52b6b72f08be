// The launcher's report (drivers/gvisor/launch_report.h): its framing, and each field compared
// with the plan from what a gVisor sandbox's /proc shows (the texts below are runsc 20240729's).
#include "drivers/gvisor/launch_report.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/drivers/test_plans.h"

namespace safex::drivers::gvisor {
namespace {

const char kStatus[] =
    "Name:\tpython3\nState:\tR (running)\nTgid:\t1\nPid:\t1\nPPid:\t0\nTracerPid:\t0\n"
    "Uid:\t65534\t65534\t65534\t65534\nGid:\t65534\t65534\t65534\t65534\nFDSize:\t512\n"
    "Groups:\t \nThreads:\t1\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n"
    "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nSeccomp:\t2\n";

const char kLimits[] =
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max cpu time              unlimited            unlimited            seconds   \n"
    "Max file size             67108864             67108864             bytes     \n"
    "Max core file size        0                    0                    bytes     \n"
    "Max processes             64                   64                   processes \n"
    "Max open files            256                  256                  files     \n";

const char kMountinfo[] =
    "16 15 0:17 / / ro - 9p none ro,trans=fd\n"
    "18 16 0:18 / /dev rw - tmpfs none rw,mode=0755\n"
    "19 16 0:19 / /sys ro,noexec - sysfs none ro\n"
    "20 16 0:20 / /usr ro - 9p none ro\n"
    "21 16 0:21 / /lib ro - 9p none ro\n"
    "22 16 0:22 / /bin ro - 9p none ro\n"
    "23 16 0:23 / /tmp rw,noexec - tmpfs none rw,size=16777216,mode=1777\n"
    "24 16 0:24 / /proc rw - proc none rw\n"
    "25 16 0:25 / /lib64 ro - 9p none ro\n"
    "26 18 0:26 / /dev/pts rw - devpts none rw\n"
    "27 16 0:27 / /.safex-launch ro - 9p none ro\n";

std::string Frame(const std::string& status, const std::string& limits,
                  const std::string& mountinfo) {
  return "SAFEX-LAUNCH 1\nstatus " + std::to_string(status.size()) + "\n" + status + "limits " +
         std::to_string(limits.size()) + "\n" + limits + "mountinfo " +
         std::to_string(mountinfo.size()) + "\n" + mountinfo + "end\n";
}

const EnforcedField* Field(const Enforcement& e, const std::string& name) {
  for (const EnforcedField& f : e.fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(LaunchReportTest, EveryPrefixIsIncompleteAndTheWholeParses) {
  const std::string frame = Frame(kStatus, kLimits, kMountinfo);
  for (size_t n = 0; n < frame.size(); ++n) {
    EXPECT_EQ(ParseSandboxReport(frame.substr(0, n)).status().code(), Status::Code::kUnavailable)
        << n;
  }
  auto r = ParseSandboxReport(frame);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, kStatus);
  EXPECT_EQ(r->limits, kLimits);
  EXPECT_EQ(r->mountinfo, kMountinfo);
}

TEST(LaunchReportTest, WhatIsNotAReportIsDataLoss) {
  const std::string frame = Frame(kStatus, kLimits, kMountinfo);
  EXPECT_EQ(ParseSandboxReport("hello world\n").status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(ParseSandboxReport(frame + "x").status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(ParseSandboxReport("SAFEX-LAUNCH 1\nlimits 0\n").status().code(),
            Status::Code::kDataLoss);
  EXPECT_EQ(ParseSandboxReport("SAFEX-LAUNCH 1\nstatus 99999999\n").status().code(),
            Status::Code::kDataLoss);
  EXPECT_EQ(ParseSandboxReport("SAFEX-LAUNCH 1\nstatus -1\n").status().code(),
            Status::Code::kDataLoss);
}

TEST(LaunchReportTest, ASandboxAsThePlanSaysMatchesEveryField) {
  const plan::Plan plan = testing::BasePlan();
  auto r = ParseSandboxReport(Frame(kStatus, kLimits, kMountinfo));
  ASSERT_TRUE(r.ok());
  Enforcement e;
  AddLaunchEvidence(plan, /*filtered=*/true, *r, &e);
  EXPECT_FALSE(e.Differs()) << e.Differences();
  for (const char* name :
       {"process.identity", "process.capabilities", "seccomp.mode", "rlimits", "mounts"}) {
    const EnforcedField* f = Field(e, name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->state, EnforcedField::State::kMatches) << name;
    EXPECT_NE(f->source.find("launcher inside the sandbox"), std::string::npos) << name;
  }
  EXPECT_EQ(Field(e, "process.identity")->observed, "uid 65534 gid 65534, no supplementary groups");
  EXPECT_EQ(Field(e, "seccomp.mode")->observed, "filter");
  EXPECT_EQ(Field(e, "mounts.sha256")->observed.size(), 64u);
  EXPECT_EQ(Field(e, "seccomp.filter")->state, EnforcedField::State::kNotObserved);
}

TEST(LaunchReportTest, EachDifferenceIsNamed) {
  const plan::Plan plan = testing::BasePlan();
  struct Case {
    std::string status, limits, mountinfo;
    bool filtered;
    const char* field;
  };
  std::string root_status = kStatus;
  root_status.replace(root_status.find("Uid:\t65534\t65534"), 16, "Uid:\t0\t65534");
  std::string caps = kStatus;
  caps.replace(caps.find("CapEff:\t0000000000000000"), 24, "CapEff:\t0000000000200000");
  std::string no_filter = kStatus;
  no_filter.replace(no_filter.find("Seccomp:\t2"), 10, "Seccomp:\t0");
  std::string nproc = kLimits;
  nproc.replace(nproc.find("64                   64"), 23, "64                   99");
  const std::string extra_mount = std::string(kMountinfo) + "28 16 0:28 / /host rw - 9p none rw\n";
  std::string writable_usr = kMountinfo;
  writable_usr.replace(writable_usr.find("/usr ro"), 7, "/usr rw");
  const Case cases[] = {
      {root_status, kLimits, kMountinfo, true, "process.identity"},
      {caps, kLimits, kMountinfo, true, "process.capabilities"},
      {no_filter, kLimits, kMountinfo, true, "seccomp.mode"},
      {kStatus, kLimits, kMountinfo, false, "seccomp.mode"},
      {kStatus, nproc, kMountinfo, true, "rlimits"},
      {kStatus, "", kMountinfo, true, "rlimits"},
      {kStatus, kLimits, extra_mount, true, "mounts"},
      {kStatus, kLimits, writable_usr, true, "mounts"},
      {kStatus, kLimits, "", true, "mounts"},
  };
  for (const Case& c : cases) {
    auto r = ParseSandboxReport(Frame(c.status, c.limits, c.mountinfo));
    ASSERT_TRUE(r.ok());
    Enforcement e;
    AddLaunchEvidence(plan, c.filtered, *r, &e);
    ASSERT_TRUE(e.Differs()) << c.field;
    EXPECT_EQ(Field(e, c.field)->state, EnforcedField::State::kDiffers) << c.field;
    int differing = 0;
    for (const EnforcedField& f : e.fields) differing += f.state == EnforcedField::State::kDiffers;
    EXPECT_EQ(differing, 1) << c.field << ": " << e.Differences();
  }
}

}  // namespace
}  // namespace safex::drivers::gvisor
