// The operator's settings for each isolation backend and for the service's delegated cgroup, from
// the host config's `backends { }` and `cgroups { }` sections (compiler/host_config.h). A plain
// value: the compiler parses it, drivers/backends.h builds the drivers from it.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "plan/plan.h"

namespace safex::plan {

struct GvisorBackendSettings {
  std::string runsc = "/usr/local/bin/runsc";
  // The gVisor platforms this host offers. The plan names its platform (and its digest covers
  // it), so this is not a default but a gate: a plan naming another one is refused before
  // anything runs, never moved to a platform its author did not choose. `kvm` is not a choice
  // (it hangs under nested virtualisation; docs/gvisor-notes.md).
  std::set<std::string> platforms = {"systrap", "ptrace"};
};

struct MicrovmBackendSettings {
  std::string qemu = "/usr/bin/qemu-system-x86_64";
  std::string kernel = "/usr/local/lib/safex/guest/vmlinuz";
  std::string initramfs = "/usr/local/lib/safex/guest/initramfs.cpio";
  std::string state_root = "/var/lib/safex/microvm";  // image cache, per-run dirs, KVM probe
  // auto: KVM when the probe says it works; require: no usable KVM refuses every run; never: TCG.
  KvmMode kvm = KvmMode::kAuto;
  // TCG (QEMU's emulator) is not a security boundary (QEMU's own security policy treats it as the
  // non-virtualisation use case): a plan for untrusted code runs only with KVM, unless the
  // operator opts in here for testing; the run's record then says "microvm/tcg".
  bool tcg_for_untrusted = false;
};

struct NativeBackendSettings {
  // The host uids (and gids, the same numbers) a native run's process gets: run slot N is
  // first_id + N, held by one live run at a time (drivers/native/id_lease.h). The range must
  // hold no account of the host (the driver checks /etc/passwd and /etc/group). The default is
  // in the range systemd leaves unused (0x70000000 up), above its container ranges.
  uint32_t first_id = 0x70000000;
  uint32_t ids = 65536;
  // Landlock narrows the file system further on kernels that have it; where it is absent the
  // run's record says "landlock=none". With require_landlock such runs are refused instead.
  bool require_landlock = false;
};

struct BackendSettings {
  GvisorBackendSettings gvisor;
  MicrovmBackendSettings microvm;
  NativeBackendSettings native;
};

// The service's delegated cgroup: the shared parent of every run's cgroup in each hierarchy, and
// where the operator caps all sandboxes together. Kept between runs (its per-run children are
// not). 0 leaves a limit unset.
struct CgroupSettings {
  std::string parent =
      "safex";  // relative to each hierarchy's root, e.g. "safex" or "system/safex"
  uint64_t memory_bytes = 0;
  uint64_t pids = 0;
  uint32_t cpus = 0;
};

}  // namespace safex::plan
