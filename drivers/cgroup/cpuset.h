// The CPUs a run's program is shown: the plan's `cpus`, not the host's. Thread pools sized by
// the CPU count (BLAS, multiprocessing, build tools) then match the run's CPU quota instead of
// over-subscribing it and running into its pids limit.
//
// `cpus` of the host's CPUs, a different slice for each run so that runs spread over the host.
// gVisor: through the run cgroup's cpuset, which runsc reads when it starts the Sentry (which
// shows that many for good); the cpuset is widened again right after
// (drivers/gvisor/visible_cpus.h), and the CFS quota limits the run. Native: the program's own
// CPU affinity, set before it execs (what `nproc` and sched_getaffinity count; glibc's sysconf
// count, e.g. Python's os.cpu_count(), reads /proc/stat there and still says the host's).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/status.h"
#include "drivers/cgroup/cgroup.h"

namespace safex::drivers::cgroup {

// `cpus` CPUs of the cpuset list `all` ("0-3,6"), as a list; "" when `all` has no more than
// that (nothing to narrow) or cannot be read.
std::string NarrowCpuList(const std::string& all, uint32_t cpus);

// Narrows the run's cpuset to `cpus` CPUs (NarrowCpuList); `*restore` gets the list to put back
// (WidenCpuset), "" when nothing was narrowed (no cpuset controller, or no more CPUs than that).
Status NarrowCpuset(RunCgroup& cg, uint32_t cpus, std::string* restore);
// Puts `*restore` back (nothing when it is empty) and empties it.
Status WidenCpuset(RunCgroup& cg, std::string* restore);

// Gives process `pid` (one thread: a sandbox's first process before it execs) `cpus` of this
// process's CPUs (NarrowCpuList); nothing when this process has no more than that.
Status NarrowAffinity(pid_t pid, uint32_t cpus);

}  // namespace safex::drivers::cgroup
