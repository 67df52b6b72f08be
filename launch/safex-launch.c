/* safex-launch: the first process of every gVisor run, inside the sandbox, before the program.
 *
 * It runs under everything the sandbox applies (the plan's uid, no capabilities, the seccomp
 * filter, the rlimits, the mount table), so what it reads of itself is what the program gets:
 * /proc/self/status (identity, capabilities, seccomp mode), /proc/self/limits and
 * /proc/self/mountinfo. It sends them raw to the supervisor on fd 3 and closes it; the supervisor
 * parses and compares them with the plan (drivers/gvisor/launch_report.h) and answers on fd 4:
 * 'g' and the launcher closes fd 4 and execs the program in its own place (same pid, same
 * environment, argv verbatim); anything else and it exits 125 without running anything.
 *
 * Usage (from the OCI spec only): safex-launch -- PROGRAM [ARG...]
 *                                 safex-launch --pool
 *                                 safex-launch --session
 *
 * --pool (a warm pool's sandbox, made before its request is known): the same report, then it
 * waits on fd 4 for the hand-over instead of a bare go-ahead: 's' makes it a session's init
 * exactly as --session would (fd 3 stays open for that until the hand-over); or 'p', a 4-byte
 * little-endian length,
 * and that many bytes: one stdin byte ('n': the program's stdin is /dev/null, 'p': the pipe the
 * sandbox was started with) and the program's argv, each string NUL-terminated. It then execs
 * the program exactly as a cold run's launcher would. While it waits it makes no call that could
 * change what the program inherits (signal mask and dispositions, cwd, umask, environment,
 * rlimits: it only reads), and nothing else runs in the sandbox, so there is nothing to reset:
 * the program starts from the state the runtime set, as in a cold run. No call is added either
 * (stdin is replaced with close and open, not dup2): a plan's filter that would kill the waiter
 * kills a cold run's launcher too.
 *
 * --session (an agent session, several commands of one task in one sandbox): the same report, then
 * it stays the sandbox's init and serves framed commands on fd 4 until EOF; see session.c.
 *
 * Report on fd 3: "SAFEX-LAUNCH 1\n", then for each source "NAME LENGTH\n" and LENGTH bytes,
 * then "end\n". Static, no allocation beyond the stack, few syscalls (openat, read, write, close,
 * execve): every one is also what any program needs to start, so a plan's filter that denies one
 * denies the program too. Linked against musl, which starts faster inside the Sentry than glibc;
 * syscalls.h keeps its calls those of a glibc program. Exit 127/126 when the program cannot be
 * executed, as a shell would. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "session.h"
#include "syscalls.h"

enum { kReportFd = 3, kGoFd = 4, kMaxSource = 64 * 1024 };
/* The hand-over's bounds (the service refuses larger argv long before). */
enum { kMaxHandOver = 4 * 1024 * 1024, kMaxArgs = 64 * 1024 };

static char buf[kMaxSource];
static char handover[kMaxHandOver + 1];
static char* handover_argv[kMaxArgs + 1];

int write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

void say(const char* a, const char* b, const char* c) {
  char line[512];
  int n = snprintf(line, sizeof line, "safex: %s%s%s\n", a, b, c);
  if (n > 0) write_all(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* One source: "NAME LENGTH\n" and its bytes (at most kMaxSource; an unreadable one is sent
 * as length 0, which the supervisor takes as "not shown"). */
static int send_source(const char* name, const char* path) {
  size_t len = 0;
  int fd = launch_open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    for (;;) {
      ssize_t r = read(fd, buf + len, sizeof buf - len);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      len += (size_t)r;
      if (len == sizeof buf) break;
    }
    close(fd);
  }
  char head[64];
  int n = snprintf(head, sizeof head, "%s %zu\n", name, len);
  if (n <= 0 || write_all(kReportFd, head, (size_t)n) != 0) return -1;
  return write_all(kReportFd, buf, len);
}

#ifdef SAFEX_LAUNCH_TEST_LIAR
/* Test build only (tests/drivers: a sandbox whose inside differs from the plan): claims to run
 * as root, so the supervisor must refuse to let the program start. */
static int send_status(void) {
  static const char kFake[] = "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\nSeccomp:\t2\n";
  char head[64];
  int n = snprintf(head, sizeof head, "status %zu\n", sizeof kFake - 1);
  if (n <= 0 || write_all(kReportFd, head, (size_t)n) != 0) return -1;
  return write_all(kReportFd, kFake, sizeof kFake - 1);
}
#else
static int send_status(void) { return send_source("status", "/proc/self/status"); }
#endif

int read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* The pool's hand-over after 'p' (see the top): stdin chosen, argv into handover_argv. Returns
 * the program's argv, or NULL when the message is malformed (then nothing runs). */
static char** read_handover(void) {
  unsigned char len_bytes[4];
  if (read_all(kGoFd, (char*)len_bytes, 4) != 0) return NULL;
  const uint32_t len = (uint32_t)len_bytes[0] | (uint32_t)len_bytes[1] << 8 |
                       (uint32_t)len_bytes[2] << 16 | (uint32_t)len_bytes[3] << 24;
  if (len < 3 || len > kMaxHandOver || read_all(kGoFd, handover, len) != 0) return NULL;
  if (handover[len - 1] != '\0') return NULL;
  handover[len] = '\0';
  if (handover[0] == 'n') {
    close(0); /* the lowest free descriptor: open gives 0 */
    if (launch_open("/dev/null", O_RDONLY) != 0) return NULL;
  } else if (handover[0] != 'p') {
    return NULL;
  }
  size_t argc = 0;
  for (size_t at = 1; at < len; at += strlen(handover + at) + 1) {
    if (argc == kMaxArgs) return NULL; /* more than it can hold: never a shorter argv */
    handover_argv[argc++] = handover + at;
  }
  handover_argv[argc] = NULL;
  return argc > 0 && handover_argv[0][0] != '\0' ? handover_argv : NULL;
}

int main(int argc, char** argv) {
  const int pooled = argc == 2 && strcmp(argv[1], "--pool") == 0;
  const int in_session = argc == 2 && strcmp(argv[1], "--session") == 0;
  if (!pooled && !in_session && (argc < 3 || strcmp(argv[1], "--") != 0)) {
    say("safex-launch: usage: safex-launch -- PROGRAM [ARG...] | --pool | --session", "", "");
    return 125;
  }
  static const char kHeader[] = "SAFEX-LAUNCH 1\n";
  if (write_all(kReportFd, kHeader, sizeof kHeader - 1) != 0 || send_status() != 0 ||
      send_source("limits", "/proc/self/limits") != 0 ||
      send_source("mountinfo", "/proc/self/mountinfo") != 0 ||
      write_all(kReportFd, "end\n", 4) != 0) {
    return 125; /* no report, no program */
  }
  if (in_session) return serve_session(kReportFd, kGoFd);
  /* A pooled sandbox may be handed to a session ('s'), whose answers go out on fd 3: kept open
   * until the hand-over says which. */
  if (!pooled) close(kReportFd);
  char go = 0;
  ssize_t r;
  do {
    r = read(kGoFd, &go, 1);
  } while (r < 0 && errno == EINTR);
  if (pooled && r == 1 && go == 's') return serve_session(kReportFd, kGoFd);
  if (pooled) close(kReportFd);
  char** program = argv + 2;
  if (pooled) {
    program = r == 1 && go == 'p' ? read_handover() : NULL;
  } else if (r != 1 || go != 'g') {
    program = NULL;
  }
  close(kGoFd);
  if (program == NULL) return 125; /* the supervisor refused the run, or never handed it over */
  execvp(program[0], program);
  const int err = errno;
  say(program[0], ": ", strerror(err));
  return err == ENOENT || err == ENOTDIR ? 127 : 126;
}
