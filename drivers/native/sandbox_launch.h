// The parent side of the native sandbox's first process (sandbox_child.h): everything it needs,
// prepared before clone3 (the child may not allocate), the clone itself, and the two exchanges
// on the channel before the program may start: placing it in the run's cgroup and writing its
// user namespace's id maps, then reading its report and answering with the go-ahead.
#pragma once

#include <linux/filter.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "drivers/cgroup/cgroup.h"
#include "drivers/native/landlock.h"
#include "drivers/native/mount_script.h"
#include "drivers/sandbox_report.h"
#include "plan/plan.h"

namespace safex::drivers::native {

struct LaunchInputs {
  const plan::Plan* plan = nullptr;
  std::vector<std::string> argv;
  std::string root;  // the prepared root directory (drivers/rootfs.h)
  // The host side of each plan mount, in plan order ("" for a tmpfs made inside).
  std::vector<std::string> mount_sources;
  uint32_t host_id = 0;  // the run's leased uid and gid on the host
  int netns_fd = -1;     // the run's network namespace (egress), or -1 for a new empty one
  std::vector<sock_filter> seccomp;
  LandlockRuleset landlock;
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;  // the program's ends
};

// The rlimits the child sets, by their /proc/self/limits names, for the evidence.
std::vector<std::pair<std::string, uint64_t>> ChildRlimitNames(const plan::Limits& limits);

class Sandbox {
 public:
  using Clock = std::chrono::steady_clock;

  Sandbox() = default;
  Sandbox(Sandbox&&) noexcept = default;
  Sandbox& operator=(Sandbox&&) noexcept = default;

  // Opens and checks every host source, then clones the first process into its namespaces. An
  // error means no process exists.
  static Result<Sandbox> Start(const LaunchInputs& in);

  // Places the child in `cg` (its limit hierarchies), while it builds its file system: the
  // moves' cost (an RCU grace period each on v1) overlaps its work. It does nothing of the
  // program's before MapIds lets it go on.
  Status Place(const cgroup::RunCgroup& cg);
  // Waits (until `deadline`, or until *cancel is set) for the child's user namespace, then maps
  // the plan's uid/gid inside to `host_id` outside (nothing else is mapped; setgroups is denied)
  // and lets it go on. An error says what failed, the child's own report first.
  Status MapIds(uint32_t host_id, Clock::time_point deadline, const std::atomic<int>* cancel);

  // The child's report of what it got (sandbox_report.h), read before the program exists.
  Result<SandboxReport> ReadReport(Clock::time_point deadline, const std::atomic<int>* cancel);
  // The host's view of the child meanwhile (its uid and gid outside, from /proc/PID/status).
  std::string HostIdentity() const;

  // The go-ahead; then waits for the execve: ok when the program runs; a 126/127 exec failure
  // as `*exec_errno` (the program was not found or could not be executed); any other failure
  // as an error.
  Status Go(int* exec_errno);

  Subprocess& process() { return process_; }
  // The run's cancel flag ended a wait above: nothing of the program ran.
  bool cancelled() const { return cancelled_; }

 private:
  Status ChildFailure(const std::string& while_doing);
  Status Waited(int wait, const std::string& what);  // a wait's end as a status

  Subprocess process_;
  UniqueFd channel_;                  // our end of the socketpair
  UniqueFd report_;                   // the failure report's read end
  std::vector<std::string> op_what_;  // the mount script's steps, for errors
  uint32_t uid_ = 0, gid_ = 0;        // the plan's, inside the user namespace
  bool cancelled_ = false;
};

}  // namespace safex::drivers::native
