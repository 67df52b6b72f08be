// Boots a throwaway microVM whose /init is the static test binary of cgroup_v2_guest_main.cc and
// checks that its tests of drivers/cgroup's v2 path passed against the guest kernel's real cgroup
// v2 (the build machine itself only has cgroup v1 for memory, pids and cpu).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "common/fs_tree.h"
#include "drivers/microvm/host_tsc.h"
#include "drivers/microvm/rootfs_image.h"
#include "drivers/microvm/vm_launcher.h"
#include "tests/microvm/microvm_test_util.h"

namespace safex::microvm::testing {
namespace {

std::string NewcEntry(const std::string& name, const std::string& data, uint32_t mode,
                      uint32_t rdev_major = 0, uint32_t rdev_minor = 0) {
  char h[111];
  std::snprintf(h, sizeof h, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", 1u, mode,
                0u, 0u, 1u, 0u, static_cast<unsigned>(data.size()), 0u, 0u, rdev_major, rdev_minor,
                static_cast<unsigned>(name.size() + 1), 0u);
  std::string e(h, 110);
  e += name;
  e.push_back('\0');
  while (e.size() % 4) e.push_back('\0');
  e += data;
  while (e.size() % 4) e.push_back('\0');
  return e;
}

TEST(CgroupV2InGuestTest, TheCgroupModulesV2PathPassesOnARealV2Kernel) {
  SAFEX_REQUIRE_MICROVM();
  std::ifstream bin(SAFEX_CGROUP_V2_GUEST_BIN, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(bin)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(bytes.empty()) << SAFEX_CGROUP_V2_GUEST_BIN;

  char tmpl[] = "/tmp/safex-cgroup-v2.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  ASSERT_EQ(chmod(tmpl, 0755), 0);  // the VMM runs unprivileged
  std::string cpio = NewcEntry("dev", "", 040755) + NewcEntry("dev/console", "", 020600, 5, 1) +
                     NewcEntry("init", bytes, 0100755) + NewcEntry("TRAILER!!!", "", 0);
  { std::ofstream(dir + "/initramfs.cpio", std::ios::binary) << cpio; }

  LaunchSpec spec;
  spec.vm.qemu_path = QemuPath();
  spec.vm.kernel_path = GuestKernel();
  spec.vm.initramfs_path = dir + "/initramfs.cpio";
  spec.vm.memory_mib = 256;
  spec.vm.tsc_khz = MeasureHostTscKhz();
  spec.uid = 0x5afe0000;
  spec.gid = 0x5afe0000;
  SessionConfig sc;
  // The test init never speaks the protocol: the session ends when the guest powers off.
  sc.boot_timeout = std::chrono::seconds(240);
  sc.console_tail_bytes = 256 * 1024;
  auto r = LaunchAndRun(spec, sc);
  RemoveTree(dir).ok();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string& console = r->session.console_tail;
  EXPECT_TRUE(r->session.vmm_exited) << "the guest did not power off in time\n" << console;
  EXPECT_NE(console.find("SAFEX-CGROUP-V2-RESULT: PASS"), std::string::npos) << console;
  EXPECT_EQ(console.find("[  FAILED  ]"), std::string::npos) << console;
  EXPECT_NE(console.find("[  PASSED  ] 6 tests"), std::string::npos) << console;
}

}  // namespace
}  // namespace safex::microvm::testing
