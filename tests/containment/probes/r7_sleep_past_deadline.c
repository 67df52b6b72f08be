// R7: ignore SIGTERM (and SIGINT, SIGHUP) and sleep forever. Contained: killed at the wall-time
// limit (+ grace), verdict timeout, exit 124.
#include <signal.h>

#include "probe.h"

int main(void) {
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  probe_started("R7", "ignore SIGTERM and sleep forever");
  for (;;) sleep(1000);
}
