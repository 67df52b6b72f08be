// pidfd system calls. glibc 2.36's <sys/pidfd.h> lacks extern "C" (its declarations get C++
// linkage and fail to link), so these call the kernel directly.
#pragma once

#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace safex {

// A pidfd for `pid` (close-on-exec), or -1 with errno.
inline int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// Sends `sig` to the process the pidfd refers to (never to a recycled pid). 0 or -1 with errno.
inline int PidfdSendSignal(int pidfd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

}  // namespace safex
