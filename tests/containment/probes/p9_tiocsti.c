// P9: TIOCSTI terminal injection on every standard descriptor and on /dev/tty. Contained: no
// terminal is shared (ENOTTY / ENXIO / ENOENT / EIO); nothing is injected.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "probe.h"

int main(void) {
  Probe p;
  probe_begin(&p, "P9", "TIOCSTI terminal injection");
  char errs[128] = "";
  const char* names[] = {"stdin", "stdout", "stderr"};
  char c = '#';
  for (int fd = 0; fd < 3; ++fd) {
    int rc = ioctl(fd, TIOCSTI, &c);
    int err = rc == 0 ? 0 : errno;
    probe_err(&p, names[fd], err);
    probe_errset_add(errs, sizeof errs, err);
    if (rc == 0) probe_escaped(&p);
  }
  int tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  int tty_err = tty < 0 ? errno : 0;
  probe_err(&p, "dev_tty_open", tty_err);
  if (tty >= 0) {
    int rc = ioctl(tty, TIOCSTI, &c);
    probe_err(&p, "dev_tty_tiocsti", rc == 0 ? 0 : errno);
    if (rc == 0) probe_escaped(&p);
    close(tty);
  }
  probe_bool(&p, "isatty_any", isatty(0) || isatty(1) || isatty(2));
  char result[200];
  snprintf(result, sizeof result, "TIOCSTI %s; /dev/tty %s", errs, probe_errname(tty_err));
  return probe_finish(&p, result);
}
