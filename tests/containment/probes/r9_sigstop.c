// R9: trap every catchable signal, then stop itself (SIGSTOP) - and a child does the same.
// Contained: still killed at the deadline (timeout, 124).
#include <signal.h>
#include <sys/wait.h>

#include "probe.h"

static void Ignore(int sig) { (void)sig; }

static void TrapAll(void) {
  for (int s = 1; s < NSIG; ++s) {
    if (s == SIGKILL || s == SIGSTOP) continue;
    signal(s, Ignore);
  }
}

int main(void) {
  TrapAll();
  pid_t child = fork();
  if (child == 0) {
    for (;;) raise(SIGSTOP);
  }
  probe_started("R9", "trap all signals and SIGSTOP itself");
  for (;;) raise(SIGSTOP);
}
