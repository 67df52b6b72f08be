// F11: gain root through a setuid binary. Run as `f11_setuid SUID_COPY`: the runner makes
// SUID_COPY a root-owned mode-4755 copy of this very program; run as `f11_setuid --report` it
// prints its real and effective uid. Contained: no_new_privs is set and the setuid copy runs with
// the caller's uid (nosuid mounts, no_new_privs); setuid(0) fails.
#include <sys/prctl.h>
#include <sys/wait.h>

#include "probe.h"

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "--report") == 0) {
    printf("%d %d\n", (int)getuid(), (int)geteuid());
    return 0;
  }
  if (argc < 2) return kProbeError;
  Probe p;
  probe_begin(&p, "F11", "gain root through a setuid binary");
  probe_int(&p, "uid", getuid());
  probe_int(&p, "no_new_privs", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
  int rc = setuid(0);
  int setuid_err = rc == 0 ? 0 : errno;
  probe_err(&p, "setuid0", setuid_err);
  if (rc == 0 && getuid() != 0) probe_escaped(&p);
  int fds[2];
  if (pipe(fds) != 0) return kProbeError;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    execl(argv[1], argv[1], "--report", (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  char buf[64] = "";
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = 0;
  int status = 0;
  waitpid(pid, &status, 0);
  int ruid = -1, euid = -1;
  if (sscanf(buf, "%d %d", &ruid, &euid) != 2) {
    probe_int(&p, "helper_status", WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  }
  probe_int(&p, "helper_ruid", ruid);
  probe_int(&p, "helper_euid", euid);
  if (euid == 0 && getuid() != 0) probe_escaped(&p);
  char result[128];
  snprintf(result, sizeof result, "setuid copy ran with euid %d; setuid(0) %s", euid,
           probe_errname(setuid_err));
  return probe_finish(&p, result);
}
