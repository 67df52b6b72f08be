// The agent's heartbeat while the program runs (microvm::Heartbeat, kHeartbeat): the guest clock,
// the workload's CPU time and where its process is, for the host's record of a run that had to be
// killed. Read from the agent's /proc (the guest's root pid namespace) and the workload cgroup.
#pragma once

#include <sys/types.h>

#include <string>

#include "drivers/microvm/guest_spec.h"
#include "guest/workload_cgroup.h"

namespace safex::guest {

// How often the agent sends one (guest time).
inline constexpr uint64_t kHeartbeatPeriodNs = 1000ull * 1000 * 1000;

// `pid` is the program's process as the agent sees it; `exited` once the agent has reaped it.
microvm::Heartbeat MakeHeartbeat(pid_t pid, bool exited, const WorkloadCgroup& cgroup);

// "S pipe_write": the state letter from /proc/<pid>/stat and the kernel function it waits in
// (/proc/<pid>/wchan), within microvm::kMaxHeartbeatState bytes; "gone" when the process no
// longer exists. Not its kernel stack: reading that takes a lock the program's own execve holds,
// and nothing the program does may stall the agent's loop (it enforces the CPU limit).
std::string ProcessState(pid_t pid);

}  // namespace safex::guest
