// Whether KVM can run this backend's guest here, decided by trying it: /dev/kvm must open and
// answer KVM_GET_API_VERSION, and then the real kernel and initramfs must boot under KVM to the
// agent's kHello within a deadline (a probe boot: safex.mode=probe). On hosts where nested
// virtualisation is unusable, /dev/kvm answers but the guest hangs: the deadline catches that and
// the VMM is killed. The result is cached in a file for the host's boot (keyed by boot_id and the
// identity of QEMU, kernel and initramfs), so only the first probe after a reboot pays the wait.
#pragma once

#include <chrono>
#include <string>

#include "drivers/microvm/vm_launcher.h"

namespace safex::microvm {

struct KvmProbeResult {
  bool usable = false;
  std::string detail;  // why not, or "booted in N ms"
  std::chrono::nanoseconds boot_time{0};
  bool from_cache = false;
};

// `base`: a LaunchSpec for a TCG run without disks (credentials, paths, cgroup unset is fine);
// the probe switches it to KVM and probe mode. `cache_file` may be "" (no caching).
KvmProbeResult ProbeKvm(const LaunchSpec& base, std::chrono::milliseconds timeout,
                        const std::string& cache_file);

}  // namespace safex::microvm
