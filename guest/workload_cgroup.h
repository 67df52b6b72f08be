// The workload's cgroup inside the guest: cgroup v2 mounted at /sys/fs/cgroup, one child cgroup
// with the plan's memory, pids and CPU limits. The program is cloned straight into it
// (CLONE_INTO_CGROUP), so not one instruction of it runs outside the limits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "drivers/microvm/guest_spec.h"

namespace safex::guest {

class WorkloadCgroup {
 public:
  static std::optional<WorkloadCgroup> Create(const microvm::GuestSpec& spec, std::string* error);

  WorkloadCgroup(WorkloadCgroup&& o) noexcept;
  WorkloadCgroup& operator=(WorkloadCgroup&&) = delete;
  WorkloadCgroup(const WorkloadCgroup&) = delete;
  ~WorkloadCgroup();

  // O_DIRECTORY fd of the cgroup (clone3's cgroup field).
  int dir_fd() const { return dir_fd_; }
  uint64_t CpuNs() const;            // cpu.stat usage_usec * 1000
  uint64_t PeakMemoryBytes() const;  // memory.peak
  uint64_t OomKills() const;         // memory.events oom_kill
  uint64_t PidsLimitHits() const;    // pids.events max
  uint64_t MemoryMaxHits() const;    // memory.events max: times usage reached memory.max
  // memory.pressure "full ... total=": microseconds in which every task of the cgroup was
  // stalled on memory (PSI; 0 when the kernel has no PSI).
  uint64_t MemoryFullStallUs() const;
  // SIGKILLs every process in the cgroup (cgroup.kill).
  void KillAll() const;

 private:
  WorkloadCgroup(std::string dir, int fd) : dir_(std::move(dir)), dir_fd_(fd) {}
  uint64_t Keyed(const char* file, const char* key) const;
  std::string dir_;
  int dir_fd_ = -1;
};

}  // namespace safex::guest
