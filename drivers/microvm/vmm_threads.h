// What QEMU's threads are doing, from the host's /proc: for the record of a guest that went
// silent while its program ran. The guest cannot say why it stopped; its VMM's threads can show
// whether the vCPU was executing (state R, its CPU time growing), idle in the guest's HLT or
// waiting for a lock (S, and the kernel function it sleeps in), or stuck on the host (D).
#pragma once

#include <sys/types.h>

#include <string>

namespace safex::microvm {

// "CPU 0/TCG S futex_wait_queue 1520 ms; qemu-system-x86 S do_sys_poll 310 ms; ...": each
// thread's name, state letter, wait channel and CPU time (user + system) so far, busiest first,
// at most `max_bytes`. "" when the process cannot be read.
// REQUIRES: `vmm_pid` is a child of this process that has not been reaped (its pid cannot be
// reused meanwhile), so the threads read are QEMU's.
std::string VmmThreads(pid_t vmm_pid, size_t max_bytes = 600);

// The process a pidfd refers to (its "Pid:" in /proc/self/fdinfo); 0 when `fd` is not a pidfd or
// the process is gone.
pid_t PidOfPidfd(int fd);

}  // namespace safex::microvm
