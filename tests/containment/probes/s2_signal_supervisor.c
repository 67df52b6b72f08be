// S2: signal the supervisor. argv: host pids (the runner's own and its ancestors'). Probes each
// with kill(pid, 0); only when that succeeds - which it must not - is SIGUSR1 sent (the runner
// counts SIGUSR1s it receives). kill(-1, 0) shows whether anything but the probe is visible.
// Contained: ESRCH for every host pid.
#include <signal.h>

#include "probe.h"

int main(int argc, char** argv) {
  Probe p;
  probe_begin(&p, "S2", "signal the supervisor");
  char errs[128] = "";
  for (int i = 1; i < argc; ++i) {
    pid_t pid = (pid_t)atoi(argv[i]);
    if (pid <= 1 || pid == getpid()) continue;
    int rc = kill(pid, 0);
    int err = rc == 0 ? 0 : errno;
    if (rc == 0) {
      probe_escaped(&p);
      kill(pid, SIGUSR1);
    }
    char key[64];
    snprintf(key, sizeof key, "pid_%d", (int)pid);
    probe_err(&p, key, err);
    probe_errset_add(errs, sizeof errs, err);
  }
  int rc = kill(-1, 0);
  probe_err(&p, "kill_all_0", rc == 0 ? 0 : errno);
  probe_int(&p, "self_pid", getpid());
  char result[200];
  snprintf(result, sizeof result, "host pids %s", errs);
  return probe_finish(&p, result);
}
