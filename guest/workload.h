// The workload: the plan's argv, cloned into its own mount, pid, ipc, uts and cgroup namespaces
// and straight into the workload cgroup, then confined and exec'd; and the agent's loop that
// forwards its output to the host, feeds its stdin and enforces the in-guest limits.
//
// Child side, in order (after clone3, no allocation, failures reported as {step, errno}):
//   fds 0-2 from the agent's pipes, every other fd closed -> setsid -> default signal dispositions
//   -> mounts private -> pivot_root into the workload root (the agent's filesystems become
//   unreachable) -> /proc of its own pid namespace -> hostname -> rlimits (NOFILE, NPROC, FSIZE,
//   CORE=0, CPU backstop) -> empty capability bounding set -> groups, gid, uid -> no capabilities
//   -> no_new_privs -> chdir(cwd) -> seccomp program -> execve (argv[0] looked up in the plan's
//   PATH when it has no '/').
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "drivers/microvm/guest_spec.h"
#include "guest/channel.h"
#include "guest/workload_cgroup.h"

namespace safex::guest {

struct Spawned {
  pid_t pid = -1;  // as the agent sees it (for its heartbeat's /proc/<pid>)
  int pidfd = -1;
  int stdin_fd = -1;   // write end; -1 when the program's stdin is /dev/null
  int stdout_fd = -1;  // read ends
  int stderr_fd = -1;
};

// Outcome of SpawnWorkload.
struct SpawnOutcome {
  std::optional<Spawned> spawned;  // set when the program is running (execve succeeded)
  // Otherwise one of these:
  std::string setup_error;  // the sandbox could not be prepared: nothing ran
  std::optional<microvm::ExitReport> exec_failure;  // execve failed: exit 127 (not found) or 126
};

// `approve` gets the sandbox report the child sends just before its exec (drivers/
// sandbox_report.h) and answers whether the program may start (the host decides: kEvidence out,
// kGo back); false, and the child exits without running anything (setup_error says so).
SpawnOutcome SpawnWorkload(const microvm::GuestSpec& spec, const std::vector<sock_filter>& program,
                           const WorkloadCgroup& cgroup,
                           const std::function<bool(const std::string&)>& approve);

// Runs until the program has exited and its output is drained: forwards stdout/stderr to the host
// as kStdout/kStderr frames (at most spec.output_bytes together), writes `stdin_data` to its stdin,
// kills the cgroup at the CPU-time or output limit, and sends a kHeartbeat about once a second
// (guest/heartbeat.h). Closes the Spawned fds.
microvm::ExitReport Supervise(Spawned spawned, const microvm::GuestSpec& spec,
                              const WorkloadCgroup& cgroup, Channel& channel,
                              const std::string& stdin_data);

}  // namespace safex::guest
