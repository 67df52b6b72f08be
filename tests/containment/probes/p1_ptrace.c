// P1: ptrace the supervisor or another run. argv: host pids (the runner's, its parent's, the
// safex supervisor's as far as the runner knows them). Each PTRACE_ATTACH is made from a child
// process so that a seccomp kill (the example policies kill or deny ptrace) is observed rather
// than ending the probe. Also lists /proc: contained when only the run's own processes are
// visible and every attach fails (EPERM / ESRCH) or is killed (SIGSYS).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "probe.h"

// "OK", an errno name, or "SIGSYS" (the child was killed).
static const char* AttachFromChild(pid_t target, char* buf, size_t cap) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe-failed";
  pid_t pid = fork();
  if (pid == 0) {
    long rc = ptrace(PTRACE_ATTACH, target, NULL, NULL);
    int err = rc == 0 ? 0 : errno;
    if (write(fds[1], &err, sizeof err) != (ssize_t)sizeof err) _exit(3);
    if (rc == 0) ptrace(PTRACE_DETACH, target, NULL, NULL);
    _exit(0);
  }
  close(fds[1]);
  int err = -1;
  ssize_t n = read(fds[0], &err, sizeof err);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n != (ssize_t)sizeof err) {
    if (WIFSIGNALED(status)) {
      snprintf(buf, cap, "%s", WTERMSIG(status) == SIGSYS ? "SIGSYS" : strsignal(WTERMSIG(status)));
    } else {
      snprintf(buf, cap, "exit%d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    return buf;
  }
  snprintf(buf, cap, "%s", probe_errname(err));
  return buf;
}

// Whether process `pid` runs with this process's real uid (its /proc status "Uid:" line).
static int SameUid(int pid) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* uid = strstr(buf, "\nUid:\t");
  return uid != NULL && atoi(uid + 6) == (int)getuid();
}

int main(int argc, char** argv) {
  Probe p;
  probe_begin(&p, "P1", "ptrace the supervisor and other processes");
  char outcomes[512] = "";
  // A sibling inside the sandbox: the only process it could legitimately trace.
  pid_t sibling = fork();
  if (sibling == 0) {
    for (;;) pause();
  }
  char buf[64];
  const char* r = AttachFromChild(sibling, buf, sizeof buf);
  probe_str(&p, "sibling", r);
  probe_list_add(outcomes, sizeof outcomes, r);
  r = AttachFromChild(1, buf, sizeof buf);
  probe_str(&p, "pid1", r);
  for (int i = 1; i < argc; ++i) {
    pid_t target = (pid_t)atoi(argv[i]);
    r = AttachFromChild(target, buf, sizeof buf);
    char key[64];
    snprintf(key, sizeof key, "host_pid_%d", (int)target);
    probe_str(&p, key, r);
    probe_list_add(outcomes, sizeof outcomes, r);
    if (strcmp(r, "OK") == 0 && target != getpid() && target != sibling) probe_escaped(&p);
  }
  kill(sibling, SIGKILL);
  waitpid(sibling, NULL, 0);
  // Which processes are visible at all, and does any look like the supervisor or the runtime?
  int visible = 0;
  char names[1024] = "";
  DIR* d = opendir("/proc");
  if (d != NULL) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      int pid = atoi(e->d_name);
      if (pid <= 0) continue;
      ++visible;
      char path[64], comm[64] = "";
      snprintf(path, sizeof path, "/proc/%d/comm", pid);
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      ssize_t n = fd >= 0 ? read(fd, comm, sizeof comm - 1) : 0;
      if (fd >= 0) close(fd);
      comm[n > 0 ? n : 0] = 0;
      char* nl = strchr(comm, '\n');
      if (nl != NULL) *nl = 0;
      probe_list_add(names, sizeof names, comm);
      // An agent session's init (safex-launch --session) is inside the sandbox: pid 1 of this
      // pid namespace, running as this uid. The host's supervisor can never be that.
      const int session_init = pid == 1 && strstr(comm, "safex-launch") != NULL && SameUid(pid);
      if (session_init) {
        // Its answers are what the host hears of each command: it must not be attachable.
        char init_buf[64];
        const char* r1 = AttachFromChild(1, init_buf, sizeof init_buf);
        probe_str(&p, "session_init_attach", r1);
        probe_list_add(outcomes, sizeof outcomes, r1);
        if (strcmp(r1, "OK") == 0) probe_escaped(&p);
      }
      if ((strstr(comm, "safex") != NULL && !session_init) || strstr(comm, "runsc") != NULL ||
          strstr(comm, "containment") != NULL || strstr(comm, "qemu") != NULL) {
        probe_escaped(&p);
      }
    }
    closedir(d);
  }
  probe_int(&p, "visible_processes", visible);
  probe_str(&p, "visible_comms", names);
  char result[700];
  snprintf(result, sizeof result, "attach: %s; %d processes visible (%s)", outcomes, visible,
           names);
  return probe_finish(&p, result);
}
