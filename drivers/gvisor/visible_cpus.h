// The CPUs a gVisor sandbox shows its program: as many as the plan's `cpus`, not the host's
// (drivers/cgroup/cpuset.h has the narrowing both local backends use).
//
// runsc tells the Sentry how many CPUs to show (`runsc boot --cpu-num`) from the cpuset of the
// container's cgroup when it starts the sandbox, and the Sentry shows that many for good:
// `nproc`, sched_getaffinity, /sys/devices/system/cpu and os.cpu_count() inside all follow it
// (runsc's --cpu-num-from-quota would never say fewer than 2, so it is not used). So the run's
// cgroup gets `cpus` of the host's CPUs in its cpuset before runsc starts (a different slice for
// each run, so that runs spread), and as soon as runsc has started the Sentry with its count
// (SentryCountedCpus; at the latest before the program starts), the cpuset gets all of them back
// (which gives every thread already in the cgroup all of them too): the CFS quota, not the
// cpuset, is what limits the run's CPU time (drivers/cgroup). Thread pools sized by the CPU count
// then match the quota instead of over-subscribing it. (Widening only once the launcher reported
// cost 40 ms of every cold start under `cpus = 1` on 2 CPUs: the boot ran on one.)
#pragma once

#include "drivers/cgroup/cgroup.h"
#include "drivers/cgroup/cpuset.h"

namespace safex::drivers::gvisor {

// Whether runsc has started the Sentry with its CPU count (a process of the cgroup runs `boot`
// with `--cpu-num`): from then on the cpuset can be widened (cgroup::WidenCpuset) without
// changing what the sandbox shows, and the rest of the boot is not confined to the narrowed CPUs.
bool SentryCountedCpus(const cgroup::RunCgroup& cg);

}  // namespace safex::drivers::gvisor
