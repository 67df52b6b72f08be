// S4: outlive the run: double-fork, setsid, ignore SIGHUP/SIGTERM, and keep running for a minute
// while the probe itself exits at once. Contained: the run ends when the probe does and every
// process is gone at teardown (the runner checks the host).
#include <signal.h>

#include "probe.h"

int main(void) {
  Probe p;
  probe_begin(&p, "S4", "double-fork a daemon to outlive the run");
  pid_t child = fork();
  if (child == 0) {
    setsid();
    if (fork() != 0) _exit(0);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    close(0);
    close(1);
    close(2);
    for (int i = 0; i < 60; ++i) sleep(1);
    _exit(0);
  }
  probe_int(&p, "daemon_forked", child > 0);
  return probe_finish(&p, child > 0 ? "daemon left running" : "fork failed");
}
