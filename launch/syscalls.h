/* The launcher's calls whose musl wrappers would make another system call than glibc's.
 *
 * The launcher is linked against musl (launch/CMakeLists.txt: it starts faster inside the Sentry)
 * but runs under the plan's syscall filter, which is written for the host's glibc programs, before
 * the program: it must make no call that a glibc program would not make, or an allow-list that
 * lets every program run would stop the launcher. Where musl's wrapper differs, the call is made
 * here as glibc makes it:
 *   open()   musl: open plus an fcntl for O_CLOEXEC        glibc: openat
 *   fork()   musl: fork, then gettid in the child          glibc: clone
 *   fstat()  musl: fstat                                   glibc: newfstatat
 * Everything else the launcher uses is the same call in both (read, write, close, execve, pipe2,
 * dup2, ppoll, wait4, kill, getpid, chdir, mkdirat, prctl, fcntl, rt_sigaction, rt_sigprocmask).
 * At start a static musl program makes arch_prctl and set_tid_address, fewer calls than glibc's
 * start (which adds brk, set_robust_list, rseq, prlimit64, readlink, getrandom and mprotect). */
#pragma once

/* (Its includers define _GNU_SOURCE first, for AT_EMPTY_PATH and O_PATH.) */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static inline int launch_open(const char* path, int flags) {
  return openat(AT_FDCWD, path, flags); /* musl passes openat straight through */
}

/* clone(SIGCHLD) with no new stack is fork. The child only moves fds, sets its signal mask and
 * working directory and execs: it uses none of the libc state that musl's fork refreshes (the
 * process has one thread, no lock is held, no atfork handler exists). */
static inline pid_t launch_fork(void) { return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0); }

/* struct stat is the kernel's layout on x86_64 for both libcs. */
static inline int launch_fstat(int fd, struct stat* st) {
  return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
}
