// P7: io_uring_setup (and enter/register on whatever it returned). Contained: EPERM / ENOSYS.
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  Probe p;
  probe_begin(&p, "P7", "io_uring_setup");
  static char params[120];  // struct io_uring_params, zeroed
  long fd = syscall(SYS_io_uring_setup, 8, params);
  int e1 = fd < 0 ? errno : 0;
  long rc2 = syscall(SYS_io_uring_enter, fd < 0 ? 1000 : fd, 0, 0, 0, NULL, 0);
  int e2 = rc2 < 0 ? errno : 0;
  long rc3 = syscall(SYS_io_uring_register, fd < 0 ? 1000 : fd, 0, NULL, 0);
  int e3 = rc3 < 0 ? errno : 0;
  probe_err(&p, "io_uring_setup", e1);
  probe_err(&p, "io_uring_enter", e2);
  probe_err(&p, "io_uring_register", e3);
  if (fd >= 0) probe_escaped(&p);
  char result[128];
  snprintf(result, sizeof result, "setup %s, enter %s, register %s", probe_errname(e1),
           probe_errname(e2), probe_errname(e3));
  return probe_finish(&p, result);
}
