/* safex-launch --session: the init of an agent session's sandbox (docs/api.md, "Sessions").
 *
 * After the same report as every launch, it stays pid 1 of the sandbox and serves the host's
 * commands, one at a time, each a frame on fd 4: a kind byte, a 4-byte little-endian length, the
 * payload. Each gets one answer frame of the same shape on fd 3.
 *
 *   'x' exec:  stdin byte ('n' /dev/null, 'd' data), 4-byte stdin length, the stdin bytes, the
 *              working directory (NUL-terminated; empty: the init's), a 4-byte count of
 *              "NAME=value" strings that are added to or replace the init's environment for this
 *              command (0xffffffff: none) and the strings, then
 *              argv (each string NUL-terminated). Forks; the child gets a pipe the launcher
 *              feeds as its stdin (or /dev/null), the sandbox's stdout and stderr, the signal
 *              mask the runtime set, the working directory and environment, and execs argv. Answer
 * (12 bytes): the child's wait status, how many other processes were still there when it ended
 * (killed), fork's errno or 0. 'k' kill:  (only while an exec runs; no answer) every process but
 * this one is killed. 'w' write: 4-byte mode, the absolute path, NUL, the bytes. Answer: 4-byte
 * errno (0: done). 'r' read:  4-byte maximum size, the absolute path, NUL. Answer: 4-byte errno,
 * the bytes.
 *
 * What holds, and why:
 * - Every command runs as a child of this init, under everything the runtime applied to it: the
 *   plan's uid, no capabilities, no_new_privs, the seccomp filter, the rlimits (a fork inherits
 *   them all; runsc exec would not apply the filter). Nothing of the launcher's own state leaks
 *   into the child: the command fds are close-on-exec, the signal mask is restored, the SIGCHLD
 *   handler is reset by execve.
 * - When the command's process ends, every other process of the sandbox is killed (kill(-1)
 *   from pid 1 reaches all but init) and reaped before the answer: nothing a command started
 *   outlives it, and the host reads the command's stdout/stderr files knowing no writer is left.
 *   The kill is repeated every 10 ms until no child is left: a fork under way while kill(-1)
 *   went through the processes can bring a new one after it (seen in gVisor: a double-forked
 *   daemon outlived one kill and held the command until the host's deadline).
 * - The launcher is not dumpable: a command running as the same uid cannot ptrace it or write
 *   its memory to forge answers.
 * - Files are written and read by this process, as the program's uid under its filter (never as
 *   the sandbox's root), walking the path one component at a time with O_NOFOLLOW: a symlink
 *   anywhere in the path, or a file that is not regular, is refused (ELOOP, EINVAL). The host
 *   checked the path first (absolute, no "." or "..", inside a writable mount).
 * The answers say what happened inside; the host believes them about as far as the program's
 * own exit status goes (they cannot loosen a limit: limits are enforced outside). */
#define _GNU_SOURCE
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "syscalls.h"

/* A command's bounds: 16 MiB of stdin or file bytes and 4 MiB of argv (the host refuses more). */
enum { kMaxCommand = 20 * 1024 * 1024 + 64, kMaxArgs = 64 * 1024, kMaxEnv = 4096 };

static char command[kMaxCommand + 1];
static char* exec_argv[kMaxArgs + 1];
static char* exec_env[kMaxEnv + 1];       /* the frame's variables */
static char* merged_env[2 * kMaxEnv + 1]; /* the init's environment with them applied */
extern char** environ;
static sigset_t runtime_mask; /* the mask the runtime started us with: each child gets it */
static int reply_fd = -1;
static int command_fd = -1;

static void on_child(int sig) { (void)sig; }

static uint32_t get32(const char* p) {
  const unsigned char* u = (const unsigned char*)p;
  return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static void put32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (char)(v >> (8 * i));
}

static int reply(char kind, const char* payload, uint32_t len) {
  char head[5];
  head[0] = kind;
  put32(head + 1, len);
  if (write_all(reply_fd, head, 5) != 0) return -1;
  return write_all(reply_fd, payload, len);
}

/* One frame's head: 0 and kind/len, 1 at EOF before a frame, -1 on an error or a bad length. */
static int read_head(char* kind, uint32_t* len) {
  char head[5];
  ssize_t r;
  do {
    r = read(command_fd, head, 1);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return 1;
  if (r != 1 || read_all(command_fd, head + 1, 4) != 0) return -1;
  *kind = head[0];
  *len = get32(head + 1);
  return *len > kMaxCommand ? -1 : 0;
}

/* --- exec ------------------------------------------------------------------------------------ */

struct exec_run {
  pid_t child;
  int status;
  int child_done;
  int killed;
  int no_children;
  uint32_t others; /* processes reaped after the command ended or was killed */
  int stdin_fd;    /* our end of the child's stdin pipe; -1 when closed */
  const char* cwd; /* "" : the init's */
  char** env;      /* NULL : the init's */
  const char* stdin_data;
  size_t stdin_len;
  size_t stdin_off;
};

static void child_exec(char** argv, const struct exec_run* e, int stdin_read) {
  if (stdin_read >= 0 && dup2(stdin_read, 0) != 0) _exit(125);
  sigprocmask(SIG_SETMASK, &runtime_mask, NULL);
  if (e->cwd[0] != '\0' && chdir(e->cwd) != 0) {
    say("working directory ", e->cwd, ": cannot change to it");
    _exit(125);
  }
  if (e->env != NULL) environ = e->env; /* this child's alone; execvp searches its PATH */
  execvp(argv[0], argv);
  const int err = errno;
  say(argv[0], ": ", strerror(err));
  _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

static void reap(struct exec_run* e) {
  for (;;) {
    int st = 0;
    const pid_t p = waitpid(-1, &st, WNOHANG);
    if (p == 0) return;
    if (p < 0) {
      if (errno == EINTR) continue;
      if (errno == ECHILD) e->no_children = 1;
      return;
    }
    if (p == e->child) {
      e->status = st;
      e->child_done = 1;
    } else if (e->child_done || e->killed) {
      ++e->others;
    }
  }
}

static void kill_all(struct exec_run* e) {
  kill(-1, SIGKILL); /* pid 1: every process of the sandbox but this one */
  e->killed = 1;
}

static void close_stdin(struct exec_run* e) {
  if (e->stdin_fd >= 0) close(e->stdin_fd);
  e->stdin_fd = -1;
}

static void feed_stdin(struct exec_run* e) {
  const size_t left = e->stdin_len - e->stdin_off;
  const ssize_t w = write(e->stdin_fd, e->stdin_data + e->stdin_off, left < 65536 ? left : 65536);
  if (w > 0) e->stdin_off += (size_t)w;
  /* done, or the command closed its stdin (EPIPE): no more input either way */
  if ((w < 0 && errno != EAGAIN && errno != EINTR) || e->stdin_off >= e->stdin_len) {
    close_stdin(e);
  }
}

/* A frame that arrives while a command runs: 'k' kills it; anything else (or EOF) is the host
 * giving up on the session: everything is killed and -1 ends the launcher. */
static int command_during_exec(struct exec_run* e) {
  char kind = 0;
  uint32_t len = 0;
  if (read_head(&kind, &len) == 0 && kind == 'k' && len == 0) {
    kill_all(e);
    return 0;
  }
  kill_all(e);
  return -1;
}

/* Until the command and every process it left are gone: reaping on SIGCHLD (blocked except
 * inside ppoll, so none is lost between a reap and the wait), stdin fed, a kill obeyed. Once
 * the command has ended (or was killed), what is left is killed again at every turn, at least
 * every 10 ms: a process forked while the last kill(-1) went through is not missed. */
static int supervise(struct exec_run* e) {
  sigset_t wait_mask = runtime_mask;
  sigdelset(&wait_mask, SIGCHLD);
  const struct timespec again = {0, 10 * 1000 * 1000};
  for (;;) {
    reap(e);
    if (e->child_done && e->no_children) return 0;
    if (e->child_done || e->killed) kill_all(e); /* what the command left behind */
    struct pollfd p[2] = {{command_fd, POLLIN, 0}, {e->stdin_fd, POLLOUT, 0}};
    const int n = ppoll(p, e->stdin_fd >= 0 ? 2 : 1, e->killed ? &again : NULL, &wait_mask);
    if (n < 0) continue; /* EINTR: a child changed state */
    if (p[0].revents != 0 && command_during_exec(e) != 0) {
      while (!e->no_children) {
        kill_all(e);
        reap(e);
      }
      return -1;
    }
    if (e->stdin_fd >= 0 && p[1].revents != 0) feed_stdin(e);
  }
}

/* Whether "NAME=..." `a` and `b` name the same variable. */
static int same_name(const char* a, const char* b) {
  const char* ea = strchr(a, '=');
  const char* eb = strchr(b, '=');
  const size_t na = ea != NULL ? (size_t)(ea - a) : strlen(a);
  const size_t nb = eb != NULL ? (size_t)(eb - b) : strlen(b);
  return na == nb && memcmp(a, b, na) == 0;
}

/* The init's environment without the variables of the frame's `count` strings, then those. */
static char** merge_env(uint32_t count) {
  size_t n = 0;
  for (char** v = environ; *v != NULL && n < kMaxEnv; ++v) {
    int replaced = 0;
    for (uint32_t i = 0; i < count && !replaced; ++i) replaced = same_name(*v, exec_env[i]);
    if (!replaced) merged_env[n++] = *v;
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (strchr(exec_env[i], '=') == NULL) return NULL;
    merged_env[n++] = exec_env[i];
  }
  merged_env[n] = NULL;
  return merged_env;
}

/* The working directory and the environment after the stdin bytes; the offset of argv, or 0
 * when malformed. */
static size_t parse_context(uint32_t len, size_t at, struct exec_run* e) {
  e->cwd = command + at;
  at += strlen(command + at) + 1;
  if (at + 4 > len) return 0;
  const uint32_t count = get32(command + at);
  at += 4;
  e->env = NULL;
  if (count == 0xffffffffu) return at;
  if (count > kMaxEnv) return 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (at >= len) return 0;
    exec_env[i] = command + at;
    at += strlen(command + at) + 1;
  }
  exec_env[count] = NULL;
  e->env = merge_env(count);
  return e->env != NULL ? at : 0;
}

/* Payload: stdin byte, stdin length, stdin bytes, cwd, environment, argv strings (the frame ends
 * with a NUL, so every string in it is terminated). NULL when malformed. */
static char** parse_exec(uint32_t len, struct exec_run* e) {
  if (len < 5 || (command[0] != 'n' && command[0] != 'd')) return NULL;
  const uint32_t in_len = get32(command + 1);
  if (in_len > len - 5 || (command[0] == 'n' && in_len != 0)) return NULL;
  e->stdin_data = command + 5;
  e->stdin_len = in_len;
  if (5 + (size_t)in_len >= len || command[len - 1] != '\0') return NULL;
  const size_t at0 = parse_context(len, 5 + in_len, e);
  if (at0 == 0 || at0 >= len) return NULL;
  size_t argc = 0;
  for (size_t at = at0; at < len; at += strlen(command + at) + 1) {
    if (argc == kMaxArgs) return NULL;
    exec_argv[argc++] = command + at;
  }
  exec_argv[argc] = NULL;
  return argc > 0 && exec_argv[0][0] != '\0' ? exec_argv : NULL;
}

static int do_exec(uint32_t len) {
  struct exec_run e = {0};
  e.stdin_fd = -1;
  char** argv = parse_exec(len, &e);
  if (argv == NULL) return -1;
  int in[2] = {-1, -1};
  if (command[0] == 'd' && pipe2(in, O_CLOEXEC) != 0) in[0] = in[1] = -1;
  char answer[12];
  e.child = launch_fork();
  if (e.child == 0) child_exec(argv, &e, command[0] == 'd' ? in[0] : -1);
  const int fork_errno = e.child < 0 ? errno : 0;
  if (in[0] >= 0) close(in[0]);
  e.stdin_fd = in[1];
  if (e.stdin_fd >= 0 && (e.stdin_len == 0 || fcntl(e.stdin_fd, F_SETFL, O_NONBLOCK) != 0)) {
    close_stdin(&e);
  }
  int rc = 0;
  if (e.child > 0) rc = supervise(&e);
  close_stdin(&e);
  put32(answer, (uint32_t)e.status);
  put32(answer + 4, e.others);
  put32(answer + 8, (uint32_t)fork_errno);
  if (rc != 0) return rc;
  return reply('x', answer, sizeof answer);
}

/* --- files ----------------------------------------------------------------------------------- */

/* One directory component, never a symlink: O_PATH|O_NOFOLLOW opens a symlink itself, and
 * fstat says what it is. (Not O_DIRECTORY|O_NOFOLLOW: runsc 20240729 follows a symlink to a
 * directory despite O_NOFOLLOW when O_DIRECTORY is given; docs/gvisor-notes.md.) Returns the fd,
 * or -errno (ELOOP for a symlink). */
static int open_dir_nofollow(int dir, const char* name) {
  const int fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  const int err = launch_fstat(fd, &st) != 0 ? errno
                  : S_ISLNK(st.st_mode)      ? ELOOP
                  : !S_ISDIR(st.st_mode)     ? ENOTDIR
                                             : 0;
  if (err == 0) return fd;
  close(fd);
  return -err;
}

/* Opens the directory that holds `path`'s last component, one component at a time from "/",
 * never following a symlink; creates missing directories when `create`. *last gets the last
 * component. Returns the fd, or -errno. */
static int open_parent(char* path, int create, char** last) {
  if (path[0] != '/') return -EINVAL;
  int dir = launch_open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -errno;
  char* at = path + 1;
  for (char* slash; (slash = strchr(at, '/')) != NULL; at = slash + 1) {
    *slash = '\0';
    int next = open_dir_nofollow(dir, at);
    if (next == -ENOENT && create && mkdirat(dir, at, 0755) == 0) next = open_dir_nofollow(dir, at);
    *slash = '/';
    close(dir);
    if (next < 0) return next;
    dir = next;
  }
  *last = at;
  return dir;
}

static int answer_errno(char kind, int err) {
  char e[4];
  put32(e, (uint32_t)err);
  return reply(kind, e, 4);
}

static int do_write(uint32_t len) {
  if (len < 6) return -1;
  const uint32_t mode = get32(command) & 07777;
  char* path = command + 4;
  const size_t path_len = strnlen(path, len - 4);
  if (path_len == len - 4) return -1;
  const char* bytes = path + path_len + 1;
  const size_t n = len - 4 - path_len - 1;
  char* last = NULL;
  const int dir = open_parent(path, 1, &last);
  if (dir < 0) return answer_errno('w', -dir);
  const int fd =
      openat(dir, last, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
  int err = fd < 0 ? errno : 0;
  close(dir);
  struct stat st;
  if (err == 0 && (launch_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) err = EINVAL;
  if (err == 0 && write_all(fd, bytes, n) != 0) err = errno != 0 ? errno : EIO;
  if (fd >= 0 && close(fd) != 0 && err == 0) err = errno;
  return answer_errno('w', err);
}

static int do_read(uint32_t len) {
  if (len < 6) return -1;
  const uint32_t max = get32(command);
  char* path = command + 4;
  if (strnlen(path, len - 4) == len - 4) return -1;
  char* last = NULL;
  const int dir = open_parent(path, 0, &last);
  if (dir < 0) return answer_errno('r', -dir);
  const int fd = openat(dir, last, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  int err = fd < 0 ? errno : 0;
  close(dir);
  struct stat st;
  if (err == 0 && (launch_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) err = EINVAL;
  const size_t cap = max < kMaxCommand - 4 ? max : kMaxCommand - 4;
  size_t got = 0;
  while (err == 0) { /* one byte past the cap tells a file that is too large */
    const ssize_t r = read(fd, command + 4 + got, cap + 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) err = errno;
    if (r <= 0) break;
    got += (size_t)r;
    if (got > cap) err = EFBIG;
  }
  if (fd >= 0) close(fd);
  if (err != 0) return answer_errno('r', err);
  put32(command, 0);
  return reply('r', command, (uint32_t)(4 + got));
}

/* --- the loop -------------------------------------------------------------------------------- */

static int set_up(int reply, int commands) {
  reply_fd = reply;
  command_fd = commands;
  if (getpid() != 1) { /* kill(-1) below must only ever reach this sandbox */
    say("safex-launch: --session must be the sandbox's first process", "", "");
    return -1;
  }
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return -1;
  if (fcntl(reply_fd, F_SETFD, FD_CLOEXEC) != 0 || fcntl(command_fd, F_SETFD, FD_CLOEXEC) != 0) {
    return -1;
  }
  /* The runtime's mask is taken before the handler is set: musl's first sigaction unblocks its
   * own internal signals in this process's mask, and the commands get the runtime's. */
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &block, &runtime_mask) != 0) return -1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_child; /* no SA_RESTART: ppoll returns when a child changes state */
  sa.sa_flags = SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGCHLD, &sa, NULL);
}

int serve_session(int reply, int commands) {
  if (set_up(reply, commands) != 0) return 125;
  for (;;) {
    char kind = 0;
    uint32_t len = 0;
    const int head = read_head(&kind, &len);
    if (head == 1) return 0; /* the host ended the session */
    if (head != 0 || read_all(command_fd, command, len) != 0) return 125;
    command[len] = '\0';
    int rc = 0;
    if (kind == 'x') {
      rc = do_exec(len);
    } else if (kind == 'w') {
      rc = do_write(len);
    } else if (kind == 'r') {
      rc = do_read(len);
    } else if (kind != 'k') { /* a kill that came after its command ended: nothing runs */
      rc = -1;
    }
    if (rc != 0) return 125;
  }
}
