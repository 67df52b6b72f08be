// The QEMU command line of one VM, as an argv array. Pure (tests/microvm/qemu_command_test.cc).
//
// Only what a run needs: `-M microvm` with -nodefaults and no user config, the kernel and
// initramfs, one virtio-serial port (the host channel, a socket fd), the kernel console on the
// ISA serial port (a socket fd, kept by the host as a bounded diagnostic tail), read-only
// virtio-blk disks passed as fds (/dev/fdset: QEMU never opens a path of the run), a virtio-net
// device only when the plan grants egress, and QEMU's own seccomp sandbox. No monitor, no display,
// no network by default, no host filesystem sharing (no 9p, no virtiofs), no option ROMs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace safex::microvm {

enum class Accel { kKvm, kTcg };
const char* AccelName(Accel a);

struct VmDisk {
  int fd = -1;         // fd number inside the QEMU process, opened O_RDONLY
  std::string serial;  // how the guest finds it (guest_spec.h)
};

struct VmConfig {
  std::string qemu_path;
  std::string kernel_path;
  std::string initramfs_path;
  Accel accel = Accel::kTcg;
  uint64_t memory_mib = 256;
  uint32_t vcpus = 1;
  // TCG: the host's TSC frequency, given to the guest as tsc_early_khz (the guest's own PIT
  // calibration fails under TCG on a loaded host, and the boot then hangs). 0: not passed.
  uint64_t tsc_khz = 0;
  uint32_t tcg_tb_mib = 64;  // TCG translation cache (QEMU's default is 1 GiB)
  int ctl_fd = -1;           // fd numbers inside the QEMU process
  int console_fd = -1;
  std::vector<VmDisk> disks;
  std::optional<int> tap_fd;  // egress only
  std::string mac;            // with tap_fd
  bool probe = false;         // the agent stops after kHello (KVM probe, boot benchmark)
  bool qemu_sandbox = true;   // -sandbox on,...
};

// The kernel command line for `c`.
std::string KernelCommandLine(const VmConfig& c);
std::vector<std::string> BuildQemuArgv(const VmConfig& c);

}  // namespace safex::microvm
