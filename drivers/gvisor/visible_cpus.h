// The CPUs a gVisor sandbox shows its program: as many as the plan's `cpus`, not the host's, but
// never fewer than two (drivers/cgroup/cpuset.h has the narrowing both local backends use).
//
// runsc tells the Sentry how many CPUs to show (`runsc boot --cpu-num`) from the cpuset of the
// container's cgroup when it starts the sandbox, and the Sentry shows that many for good:
// `nproc`, sched_getaffinity, /sys/devices/system/cpu and os.cpu_count() inside all follow it.
// So the run's cgroup gets SentryCpuCount(cpus) of the host's CPUs in its cpuset before runsc
// starts (a different slice for each run, so that runs spread), and as soon as runsc has started
// the Sentry with its count (SentryCountedCpus; at the latest before the program starts), the
// cpuset gets all of them back (which gives every thread already in the cgroup all of them too):
// the CFS quota, not the cpuset, is what limits the run's CPU time (drivers/cgroup). Thread pools
// sized by the CPU count then match the quota instead of over-subscribing it. (Widening only
// once the launcher reported cost 40 ms of every cold start under `cpus = 1` on 2 CPUs: the boot
// ran on one.)
//
// Why at least two: the same count is the Sentry's GOMAXPROCS (runsc's loader sets one from the
// other; this runsc has no way to part them). With one, a Sentry that has been idle takes 10-20
// ms to run a task that a host fd woke (most likely the fd notifier's goroutine keeps the only P
// in its next epoll_wait until the Go runtime's monitor takes it back): every warm-pool hand-over
// and session command paid that, and so does a program that waits on its stdin or the network
// (both come in through host fds). Measured with bench/gvisor/pool_handover_bench: the waiter woke
// 11-22 ms after the host's write with one CPU shown, 0.3-2.7 ms with two. runsc's own
// --cpu-num-from-quota never shows fewer than 2 either. The quota still holds a `cpus = 1` run to
// one CPU's worth of time; only the count says 2.
#pragma once

#include <cstdint>

#include "drivers/cgroup/cgroup.h"
#include "drivers/cgroup/cpuset.h"

namespace safex::drivers::gvisor {

// How many CPUs a sandbox of a plan with `cpus` shows (see the top): `cpus`, at least 2; 0 (no
// CPU limit) stays 0, the host's.
uint32_t SentryCpuCount(uint32_t cpus);

// Whether runsc has started the Sentry with its CPU count (a process of the cgroup runs `boot`
// with `--cpu-num`): from then on the cpuset can be widened (cgroup::WidenCpuset) without
// changing what the sandbox shows, and the rest of the boot is not confined to the narrowed CPUs.
bool SentryCountedCpus(const cgroup::RunCgroup& cg);

}  // namespace safex::drivers::gvisor
