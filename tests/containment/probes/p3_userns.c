// P3: a new user namespace to gain capabilities: unshare(CLONE_NEWUSER), and clone() with
// CLONE_NEWUSER (which a filter on unshare alone would miss); inside, try what the capabilities
// would allow (mount, sethostname). Contained: EPERM, or the namespace exists but grants nothing
// outside the sandbox (the mount and sethostname fail or only touch the sandbox's own kernel).
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "probe.h"

int main(void) {
  Probe p;
  probe_begin(&p, "P3", "new user namespace to gain capabilities");
  int rc = unshare(CLONE_NEWUSER);
  int unshare_err = rc == 0 ? 0 : errno;
  probe_err(&p, "unshare_newuser", unshare_err);
  int fds[2];
  if (pipe(fds) != 0) return kProbeError;
  long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
  if (pid == 0) {
    int errs[2];
    errs[0] = mount("tmpfs", "/tmp", "tmpfs", 0, "size=1m") == 0 ? 0 : errno;
    errs[1] = sethostname("safex-p3", 8) == 0 ? 0 : errno;
    if (write(fds[1], errs, sizeof errs) != (ssize_t)sizeof errs) _exit(3);
    _exit(0);
  }
  int clone_err = pid < 0 ? errno : 0;
  close(fds[1]);
  probe_err(&p, "clone_newuser", clone_err);
  int inner[2] = {-1, -1};
  char result[200];
  if (pid > 0) {
    int status = 0;
    ssize_t n = read(fds[0], inner, sizeof inner);
    waitpid((pid_t)pid, &status, 0);
    if (n == (ssize_t)sizeof inner) {
      probe_err(&p, "inner_mount", inner[0]);
      probe_err(&p, "inner_sethostname", inner[1]);
    } else {
      probe_int(&p, "inner_signal", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    // A mount inside a user namespace the sandbox created stays in the sandbox's kernel; it is
    // an escape only if it worked AND the sandbox's kernel is the host's (the runner knows).
    if (inner[0] == 0) probe_escaped(&p);
    snprintf(result, sizeof result, "unshare %s; clone(NEWUSER) OK, then mount %s, sethostname %s",
             probe_errname(unshare_err), inner[0] >= 0 ? probe_errname(inner[0]) : "killed",
             inner[1] >= 0 ? probe_errname(inner[1]) : "killed");
  } else {
    snprintf(result, sizeof result, "unshare %s; clone(NEWUSER) %s", probe_errname(unshare_err),
             probe_errname(clone_err));
  }
  if (unshare_err == 0) probe_escaped(&p);
  return probe_finish(&p, result);
}
