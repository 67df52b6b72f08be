// Per-run cgroups for cgroup v1 (one hierarchy per controller, as on this project's build machine)
// and cgroup v2 (one unified tree, as on modern hosts), detected at start.
//
// Everything lives under the caller's own subtree `<parent>/<run name>` (parent defaults to
// "safex"); nothing is ever created inside another process's cgroup. The object that creates a
// run cgroup removes it (RunCgroup is move-only RAII): leftover processes are killed first and
// rmdir is retried briefly while the kernel still reports EBUSY. Parents are shared by concurrent
// runs and are left in place.
//
// Usage:
//   SAFEX_ASSIGN_OR_RETURN(CgroupHost host, CgroupHost::Detect());
//   SAFEX_ASSIGN_OR_RETURN(RunCgroup cg, host.CreateRun("safex", run_id, limits));
//   ... start processes in cg (e.g. OCI linux.cgroupsPath = cg.oci_path()) ...
//   cg.CpuUsageNs(); cg.OomKills(); ...            // while and after the run
//   cg.Destroy();                                  // or let it go out of scope
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "drivers/cgroup/cgroup_fs.h"

namespace safex::drivers {
struct Enforcement;
}

namespace safex::drivers::cgroup {

enum class Version { kV1, kV2 };
const char* VersionName(Version v);

// Limits applied when a run cgroup is created. 0 leaves that limit unset.
struct Limits {
  uint64_t memory_bytes =
      0;  // v1 memory.limit_in_bytes (+ memsw: no swap); v2 memory.max (+ swap.max 0)
  uint64_t pids_max = 0;  // pids.max
  uint32_t cpus = 0;      // CFS quota of `cpus` whole CPUs per 100 ms period
};

class RunCgroup;

// What the kernel enforces on a run cgroup, read back from its control files and its ancestors'
// (a cgroup can never use more than its strictest ancestor allows). 0: unlimited.
struct EffectiveLimits {
  uint64_t memory_bytes = 0;
  uint64_t pids_max = 0;
  uint64_t cpu_millis = 0;  // CFS quota per period in thousandths of a CPU (2 CPUs: 2000)
  // The control file that sets each (the strictest on the path); "" when nothing limits it.
  std::string memory_source, pids_source, cpu_source;
};

// The host's cgroup layout, found once at start. Copyable; cheap.
class CgroupHost {
 public:
  // Inspects `root` (normally /sys/fs/cgroup). v2 when root/cgroup.controllers exists; otherwise
  // v1, where every sub-directory holding `tasks` and `cgroup.procs` is a hierarchy (a run is
  // placed in all of them, so no runtime has to create cgroups of its own). `fs` must outlive the
  // CgroupHost and every RunCgroup it creates; nullptr means the host's filesystem.
  static Result<CgroupHost> Detect(const std::string& root = "/sys/fs/cgroup",
                                   CgroupFs* fs = nullptr);

  Version version() const { return version_; }
  const std::string& root() const { return root_; }
  // Absolute directories of the hierarchies in use: v1 one per distinct hierarchy, v2 the root.
  std::vector<std::string> HierarchyDirs() const;

  // Fails with Unavailable (and a message saying what is missing) unless the memory, pids and cpu
  // controllers (and cpuacct on v1) are available and `parent` can be created and written.
  Status CheckUsable(const std::string& parent) const;

  // Creates (if missing) `parent` (a relative path such as "safex" or "a/b") with the controllers
  // enabled, then `parent/name` with `limits` applied. `name` must be [A-Za-z0-9_.-]+ and not
  // exist yet (a leftover is never adopted).
  Result<RunCgroup> CreateRun(const std::string& parent, const std::string& name,
                              const Limits& limits) const;

  // The delegated parent's own limits: all runs below it together (the operator's cap over every
  // sandbox of the host; the host config's `cgroups { }`). Creates `parent` when missing; 0
  // leaves a limit as it is.
  Status LimitParent(const std::string& parent, const Limits& limits) const;

  // Crash recovery only: takes ownership of whatever exists of `parent/name` (left by a process
  // that died) so that it can be destroyed. NotFound if nothing exists.
  Result<RunCgroup> Adopt(const std::string& parent, const std::string& name) const;

 private:
  struct V1Hierarchy {
    std::string dir;                       // absolute, e.g. /sys/fs/cgroup/memory
    std::vector<std::string> controllers;  // e.g. {"cpu", "cpuacct"} or {"name=systemd"}
  };

  CgroupHost() = default;
  bool V1Has(const std::string& controller) const;
  Status EnsureParent(const std::string& parent) const;
  Status Write(const std::string& dir, const char* file, const std::string& value) const;
  Status WriteV2Limits(const std::string& dir, const Limits& limits) const;
  Status WriteV1Limits(const std::vector<std::string>& controllers, const std::string& dir,
                       const Limits& limits) const;

  Version version_ = Version::kV2;
  std::string root_;
  CgroupFs* fs_ = nullptr;
  std::vector<V1Hierarchy> v1_;
  std::vector<std::string> v2_controllers_;

  friend class RunCgroup;
};

// One run's cgroup (in every v1 hierarchy, or one v2 directory). Move-only; removed on
// destruction. Thread-safety: the accessors may be called from one thread at a time.
class RunCgroup {
 public:
  RunCgroup() = default;
  ~RunCgroup();
  RunCgroup(RunCgroup&& o) noexcept;
  RunCgroup& operator=(RunCgroup&& o) noexcept;
  RunCgroup(const RunCgroup&) = delete;
  RunCgroup& operator=(const RunCgroup&) = delete;

  bool valid() const { return !dirs_.empty(); }
  Version version() const { return version_; }
  // "/<parent>/<name>": an absolute path from each hierarchy's root, as OCI linux.cgroupsPath.
  const std::string& oci_path() const { return rel_; }
  // Absolute directories of this cgroup (one per v1 hierarchy; one on v2).
  const std::vector<std::string>& dirs() const { return dirs_; }
  // The directories whose controllers enforce a run's limits and account its use: on v2 the one,
  // on v1 those of memory, pids, cpu and cpuacct (deduplicated). A process placed in these is
  // limited and counted; placing it in the others too (freezer, devices, ...) only costs time
  // (each move waits for an RCU grace period on v1).
  std::vector<std::string> LimitDirs() const;

  // CPU time (user + system) of every process that ran in the cgroup.
  Result<uint64_t> CpuUsageNs() const;
  // High-water mark of memory charged to the cgroup (v2 without memory.peak: current usage).
  Result<uint64_t> PeakMemoryBytes() const;
  // The cgroup's share of contended CPU against its siblings (the other runs): low while a
  // pooled sandbox boots and waits (v1 cpu.shares 2, v2 cpu.weight 1), so refills do not slow
  // running sandboxes; normal (1024 / 100, the kernel's default) from its hand-over on.
  Status SetCpuPriority(bool low);
  // The CPUs of the cgroup's cpuset (cpuset.cpus, a list such as "0-3,6"), and setting them.
  // Changing them also changes the CPU affinity of every task already in the cgroup. v2 without
  // the cpuset controller in the run's cgroup: FailedPrecondition.
  Result<std::string> CpusetCpus() const;
  Status SetCpusetCpus(const std::string& list);
  // Starts the high-water mark again from the current usage (a pooled sandbox's hand-over: the
  // peak is then the run's, not the boot's). v1: memory.max_usage_in_bytes is reset. v2 has no
  // global reset (a write to memory.peak resets it for that open file only): FailedPrecondition,
  // and the peak still includes the boot.
  Status ResetPeakMemory();
  // How many times the kernel OOM-killed a process of this cgroup at its memory limit.
  Result<uint64_t> OomKills() const;
  // How many times a fork/clone failed at pids.max.
  Result<uint64_t> PidsLimitHits() const;
  // Processes currently in the cgroup (any hierarchy that tracks them).
  Result<std::vector<pid_t>> Procs() const;
  // The limits the kernel enforces on this cgroup, read back now (cgroup_readback.cc). An
  // unreadable or unparsable control file is an error: it cannot be shown to hold.
  Result<EffectiveLimits> ReadEffectiveLimits() const;
  // The command line of each process in the cgroup, from the host kernel's /proc/PID/cmdline
  // (at most 64 KiB each; a process that went away meanwhile is skipped): what the runtime was
  // really started with (gVisor's sandbox process, QEMU), for the run's evidence.
  std::vector<std::vector<std::string>> MemberCommandLines() const;

  // Freezes or thaws every process in the cgroup (v1 freezer.state FROZEN / THAWED, v2
  // cgroup.freeze 1 / 0), as `runsc pause` and `runsc resume` do to a sandbox. A frozen process
  // uses no CPU and runs nothing until thawed; freezing takes effect within moments (the kernel
  // stops each task at its next return to user space). A host without the freezer (v1 without
  // the hierarchy, v2 without cgroup.freeze): FailedPrecondition, and nothing changes.
  Status SetFrozen(bool frozen);
  // SIGKILLs every process in the cgroup (v2 cgroup.kill when the kernel has it); thaws it first
  // (on v1 a frozen task does not act on a SIGKILL until it is thawed).
  Status KillAll();
  // Kills what is left, then removes the directories, retrying rmdir on EBUSY for up to
  // `patience`. Idempotent; after success valid() is false.
  Status Destroy(std::chrono::milliseconds patience = std::chrono::milliseconds(3000));

 private:
  friend class CgroupHost;

  std::string DirOf(const std::string& controller) const;
  Status ReadCpuQuota(EffectiveLimits* e) const;
  Result<std::string> Read(const std::string& dir, const char* file) const;
  Result<uint64_t> ReadKeyed(const std::string& dir, const char* file, const char* key) const;

  Version version_ = Version::kV2;
  CgroupFs* fs_ = nullptr;
  std::string rel_;
  std::vector<std::string> dirs_;
  // Controller name -> index into dirs_ (v1); empty on v2.
  std::vector<std::pair<std::string, size_t>> by_controller_;
};

// Adds to `e` the limits the kernel enforces on `cg` (read back, ancestors included) against
// `intended`, the limits written for the plan: memory, pids and CPU, each matching or differing.
void CompareLimits(const Limits& intended, const RunCgroup& cg, Enforcement* e);

}  // namespace safex::drivers::cgroup
