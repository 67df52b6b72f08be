// Shared helpers of the microVM tests: where the guest kernel and the freshly built initramfs are,
// driver options for tests, and small plans (busybox-static as the only host file, so the rootfs
// image builds in milliseconds).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "drivers/microvm/microvm_driver.h"
#include "plan/plan.h"
#include "tests/support/leak_check.h"
#include "tests/support/test_support.h"

namespace safex::microvm::testing {

inline std::string GuestKernel() { return "/usr/local/lib/safex/guest/vmlinuz"; }
// The initramfs packed from this build's agent (target safex_guest_initramfs).
inline std::string TestInitramfs() { return safex::testing::BuildDir() + "/guest/initramfs.cpio"; }
inline std::string QemuPath() { return "/usr/bin/qemu-system-x86_64"; }
inline std::string Busybox() { return "/bin/busybox"; }
// Persistent across tests (image cache, KVM probe cache); run directories under it are removed
// by every run.
inline std::string TestStateRoot() { return "/var/lib/safex/microvm-test"; }

inline bool FileExists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

// "" when everything a VM test needs is here, otherwise what is missing.
inline std::string MissingPrerequisite() {
  if (!safex::testing::IsRoot()) return "needs root";
  if (!FileExists(QemuPath())) return "qemu-system-x86_64 (qemu-system-x86)";
  if (!FileExists(GuestKernel())) return "guest kernel (scripts/build-guest.sh)";
  if (!FileExists(TestInitramfs())) return "build-tree initramfs (target safex_guest_initramfs)";
  if (!FileExists(Busybox())) return "busybox-static";
  if (!FileExists("/usr/bin/mkfs.erofs")) return "erofs-utils";
  return "";
}

#define SAFEX_REQUIRE_MICROVM()                                                   \
  do {                                                                            \
    std::string missing_ = ::safex::microvm::testing::MissingPrerequisite();      \
    SAFEX_REQUIRE(missing_.empty(), "microVM prerequisite missing: " + missing_); \
  } while (0)

// A test whose VMs must leave nothing behind: QEMU processes, cgroups, run directories under the
// test state root, mounts (tests/support/leak_check.h), checked after each test.
class LeakCheckedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    leak_options_.state_root = TestStateRoot() + "/runs";
    before_ = safex::testing::LeakSnapshot::Take(leak_options_);
  }
  void TearDown() override {
    auto leaks = safex::testing::WaitForNoLeaks(before_, std::chrono::seconds(5), leak_options_);
    EXPECT_TRUE(leaks.empty()) << "left behind:\n" << safex::testing::JoinLines(leaks);
  }

  safex::testing::LeakCheckOptions leak_options_;
  safex::testing::LeakSnapshot before_;
};

inline drivers::MicrovmOptions TestOptions() {
  drivers::MicrovmOptions o;
  o.kernel_path = GuestKernel();
  o.initramfs_path = TestInitramfs();
  o.state_root = TestStateRoot();
  // TCG without the KVM probe; the probe has its own tests.
  o.kvm = plan::KvmMode::kNever;
  // TCG is no boundary for untrusted code: a test host opts in (plan/backend_settings.h).
  o.tcg_for_untrusted = true;
  o.boot_timeout = std::chrono::seconds(90);
  return o;
}

inline plan::Mount Bind(const std::string& path) {
  plan::Mount m;
  m.kind = plan::MountKind::kBind;
  m.source = path;
  m.target = path;
  return m;
}

inline plan::Mount Tmpfs(const std::string& target, uint64_t size,
                         plan::MountKind kind = plan::MountKind::kTmpfs) {
  plan::Mount m;
  m.kind = kind;
  m.target = target;
  m.read_only = false;
  m.size_bytes = size;
  m.noexec = true;
  return m;
}

// busybox at /bin/busybox, a 16 MiB /tmp, every limit set, uid/gid 65534.
inline plan::Plan BusyboxPlan() {
  plan::Plan p;
  p.policy_name = "microvm-test";
  p.trust = plan::Trust::kUntrusted;
  p.backend = plan::Backend::kMicrovm;
  p.microvm.kvm = plan::KvmMode::kAuto;
  p.limits.wall_time_ns = 30'000'000'000ull;
  p.limits.cpu_time_ns = 20'000'000'000ull;
  p.limits.memory_bytes = 128ull << 20;
  p.limits.pids = 32;
  p.limits.open_files = 64;
  p.limits.output_bytes = 1 << 20;
  p.limits.disk_bytes = 16ull << 20;
  p.limits.cpus = 1;
  p.mounts = {Bind(Busybox()), Tmpfs("/tmp", 16ull << 20)};
  p.env = {{"PATH", "/bin"}};
  return p;
}

inline std::vector<std::string> Sh(const std::string& script) {
  return {"/bin/busybox", "sh", "-c", script};
}

}  // namespace safex::microvm::testing
