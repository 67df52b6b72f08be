// The QEMU command line holds only what a run needs (no network, no host sharing, no monitor).
#include "drivers/microvm/qemu_command.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "drivers/microvm/guest_tap.h"

namespace safex::microvm {
namespace {

VmConfig Base() {
  VmConfig c;
  c.qemu_path = "/usr/bin/qemu-system-x86_64";
  c.kernel_path = "/k/vmlinuz";
  c.initramfs_path = "/k/initramfs.cpio";
  c.memory_mib = 288;
  c.vcpus = 2;
  c.tsc_khz = 2299998;
  c.ctl_fd = 3;
  c.console_fd = 4;
  return c;
}

bool Has(const std::vector<std::string>& argv, const std::string& s) {
  return std::find(argv.begin(), argv.end(), s) != argv.end();
}

std::string After(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

std::string Joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += a + " ";
  return s;
}

TEST(QemuCommandTest, TcgRunHasOnlyWhatItNeeds) {
  VmConfig c = Base();
  c.disks = {{5, "safex-rootfs"}, {6, "safex-input"}};
  auto argv = BuildQemuArgv(c);
  EXPECT_EQ(argv[0], "/usr/bin/qemu-system-x86_64");
  EXPECT_EQ(After(argv, "-M"), "microvm,x-option-roms=off");
  EXPECT_EQ(After(argv, "-accel"), "tcg,tb-size=64");
  EXPECT_EQ(After(argv, "-cpu"), "max,-erms");
  EXPECT_EQ(After(argv, "-m"), "288M");
  EXPECT_EQ(After(argv, "-smp"), "2");
  EXPECT_TRUE(Has(argv, "-nodefaults"));
  EXPECT_EQ(After(argv, "-name"), "safex,debug-threads=on");  // named threads: vmm_threads.h
  EXPECT_TRUE(Has(argv, "-no-user-config"));
  EXPECT_TRUE(Has(argv, "-no-reboot"));
  EXPECT_EQ(After(argv, "-display"), "none");
  EXPECT_EQ(After(argv, "-sandbox"),
            "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
  std::string all = Joined(argv);
  // Disks: fds only, read-only, found by serial.
  EXPECT_NE(all.find("-add-fd fd=5,set=1 -drive file=/dev/fdset/1,if=none,id=disk0,format=raw,"
                     "readonly=on -device virtio-blk-device,drive=disk0,serial=safex-rootfs"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("fd=6,set=2"), std::string::npos);
  EXPECT_NE(all.find("socket,id=ctl,fd=3"), std::string::npos);
  EXPECT_NE(all.find("virtserialport,chardev=ctl,name=safex.0"), std::string::npos);
  EXPECT_NE(all.find("socket,id=con,fd=4"), std::string::npos);
  // Nothing the plan did not ask for.
  for (const char* absent : {"-netdev", "-nic", "-net", "-virtfs", "9p", "virtiofs", "vhost",
                             "-monitor", "-qmp", "-vnc", "-spice", "-runas", "-daemonize"}) {
    EXPECT_EQ(all.find(absent), std::string::npos) << absent << " in " << all;
  }
}

TEST(QemuCommandTest, KernelCommandLine) {
  VmConfig c = Base();
  EXPECT_EQ(KernelCommandLine(c),
            "console=ttyS0 quiet panic=-1 pci=off cryptomgr.notests tsc_early_khz=2299998 "
            "tsc=reliable");
  c.probe = true;
  EXPECT_EQ(KernelCommandLine(c),
            "console=ttyS0 quiet panic=-1 pci=off cryptomgr.notests tsc_early_khz=2299998 "
            "tsc=reliable safex.mode=probe");
  c.accel = Accel::kKvm;  // KVM guests get kvmclock; the TSC hint is for TCG only
  c.probe = false;
  EXPECT_EQ(KernelCommandLine(c), "console=ttyS0 quiet panic=-1 pci=off cryptomgr.notests");
  c.accel = Accel::kTcg;
  c.tsc_khz = 0;
  EXPECT_EQ(KernelCommandLine(c), "console=ttyS0 quiet panic=-1 pci=off cryptomgr.notests");
}

TEST(QemuCommandTest, KvmUsesTheHostCpu) {
  VmConfig c = Base();
  c.accel = Accel::kKvm;
  auto argv = BuildQemuArgv(c);
  EXPECT_EQ(After(argv, "-accel"), "kvm");
  EXPECT_EQ(After(argv, "-cpu"), "host");
}

TEST(QemuCommandTest, NetworkDeviceOnlyWithATap) {
  VmConfig c = Base();
  c.tap_fd = 7;
  c.mac = "52:54:00:12:34:56";
  std::string all = Joined(BuildQemuArgv(c));
  EXPECT_NE(all.find("-netdev tap,id=net0,fd=7 -device virtio-net-device,netdev=net0,"
                     "mac=52:54:00:12:34:56"),
            std::string::npos)
      << all;
}

// The guest's MAC: locally administered unicast (first octet 0x02), stable per run, distinct
// between runs.
TEST(GuestTapTest, GuestMacIsLocalUnicastAndPerRun) {
  std::string a = GuestMac("run-a");
  EXPECT_EQ(a.size(), 17u);
  EXPECT_EQ(a.substr(0, 3), "02:");
  for (size_t i = 2; i < a.size(); i += 3) EXPECT_EQ(a[i], ':') << a;
  EXPECT_EQ(a, GuestMac("run-a"));
  EXPECT_NE(a, GuestMac("run-b"));
}

}  // namespace
}  // namespace safex::microvm
