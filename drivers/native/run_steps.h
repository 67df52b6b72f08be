// The steps of one native run (NativeDriver::Run is their script, in this order). Each takes the
// run's RunState, adds what it creates to it (so its teardown removes it on every way out), and
// says why when it cannot.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"
#include "drivers/cgroup/cgroup.h"
#include "drivers/driver.h"
#include "drivers/native/landlock.h"
#include "drivers/native/native_driver.h"
#include "drivers/native/outcome.h"
#include "drivers/native/run_state.h"
#include "plan/plan.h"

namespace safex::drivers::native {

struct RunContext {
  const plan::Plan& plan;
  const RunRequest& req;
  const NativeOptions& options;
};

// Our ends of the program's stdio.
struct RunIo {
  UniqueFd stdin_w;  // when the request has stdin
  UniqueFd stdout_r;
  UniqueFd stderr_r;
};

// 1. The run's host id (id_lease.h), then its private directory (0700) with its owner lock.
Status CreateRunDirectory(const RunContext& c, const std::string& runs_dir,
                          const std::string& ids_dir, RunState& s);
// 2. The host side of every plan mount: binds as the plan names them, the input (or an empty
//    read-only stand-in), one size-capped tmpfs per output mount owned by the run's host id.
Status PrepareMountSources(const RunContext& c, RunState& s);
// 3. The run's cgroup with the plan's memory, pids and CPU limits.
Status CreateCgroup(const RunContext& c, const cgroup::CgroupHost& cgroups, RunState& s);
// 4. No network (the sandbox's own empty namespace), or the run's own from the provider.
Result<std::string> CreateNetwork(const RunContext& c, RunState& s);
// 5. The fresh root: mount points, and /etc with the run network's hosts file.
Status PrepareRoot(const RunContext& c, const std::string& hosts, RunState& s);
// What the host kernel shows of the run once its cgroup and network exist.
void ReadBackHostSide(const LandlockRuleset& landlock, RunState& s, Enforcement* e);
// 6. The sandbox's first process (sandbox_launch.h) with the program's stdio, placed in the
//    run's cgroup while it builds its file system.
Result<RunIo> StartSandbox(const RunContext& c, const LandlockRuleset& landlock,
                           const std::vector<sock_filter>& seccomp, RunState& s);
// 7. Its ids mapped once its user namespace exists, then its report compared with the plan (the
//    caller refuses the run when the evidence differs).
Status AwaitReport(const RunContext& c, RunState& s, Enforcement* e);
// 8. Until the program is gone: stdin fed, output captured (the cap stops the run), the wall
//    deadline, CPU time from the cgroup, cancellation; then what was still written is drained.
Observation Supervise(const RunContext& c, RunIo& io, RunState& s, RunResult* result);
// 9. The cgroup's counters after the run (every process is gone: they are final).
void ReadAccounting(const RunContext& c, RunState& s, Observation* o, RunResult* result);
// 10. Each output mount handed to the request's collector.
void CollectOutputs(const RunContext& c, RunState& s);

}  // namespace safex::drivers::native
