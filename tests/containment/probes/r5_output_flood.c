// R5: flood stdout and stderr with 4 GiB. Contained: capture capped at the output limit and
// marked truncated, the run stopped (output-limit), the supervisor's memory bounded (runner).
#include <signal.h>

#include "probe.h"

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  probe_started("R5", "write 4 GiB to stdout and stderr");
  static char chunk[1 << 20];
  memset(chunk, 'x', sizeof chunk);
  for (int i = 0; i < 4096; ++i) {
    int fd = (i & 1) ? STDERR_FILENO : STDOUT_FILENO;
    if (write(fd, chunk, sizeof chunk) < 0 && errno != EINTR) break;
  }
  Probe p;
  probe_begin(&p, "R5", "write 4 GiB to stdout and stderr");
  probe_escaped(&p);  // it got to write everything and is still running
  return probe_finish(&p, "wrote 4 GiB");
}
