// P6: userfaultfd (the syscall and /dev/userfaultfd). Contained: EPERM / ENOSYS / ENOENT.
#include <fcntl.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  Probe p;
  probe_begin(&p, "P6", "userfaultfd");
  long rc = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  int e1 = rc < 0 ? errno : 0;
  int fd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  int e2 = fd < 0 ? errno : 0;
  probe_err(&p, "userfaultfd", e1);
  probe_err(&p, "dev_userfaultfd", e2);
  if (rc >= 0 || fd >= 0) probe_escaped(&p);
  char result[96];
  snprintf(result, sizeof result, "syscall %s, /dev/userfaultfd %s", probe_errname(e1),
           probe_errname(e2));
  return probe_finish(&p, result);
}
