// Credential changes for the window between clone and execve, as raw system calls.
//
// Why not glibc's setgroups/setresgid/setresuid: in a multi-threaded process they run glibc's
// "setxid" protocol, which signals every other thread of the process to change its credentials
// too and waits for each. A child cloned from a multi-threaded parent (the supervisor, the
// service) has one thread, but its copy of glibc's thread list still names the parent's, and for
// a thread that was being created at the moment of the clone it waits forever (regression: a
// native sandbox hung before its user namespace existed, only under load). The raw calls change
// the calling thread's credentials, which in such a child is all of them.
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>

namespace safex {

inline int RawSetgroups(size_t n, const gid_t* groups) {
  return static_cast<int>(syscall(SYS_setgroups, n, groups));
}
inline int RawSetresgid(gid_t gid) {
  return static_cast<int>(syscall(SYS_setresgid, gid, gid, gid));
}
inline int RawSetresuid(uid_t uid) {
  return static_cast<int>(syscall(SYS_setresuid, uid, uid, uid));
}

}  // namespace safex
