// R8: open /dev/null until open fails. Contained: EMFILE at the open-files limit, inside only.
#include <fcntl.h>

#include "probe.h"

int main(void) {
  Probe p;
  probe_begin(&p, "R8", "open files until EMFILE");
  int opened = 0, err = 0;
  for (; opened < (1 << 20); ++opened) {
    if (open("/dev/null", O_RDONLY) < 0) {
      err = errno;
      break;
    }
  }
  probe_int(&p, "opened", opened);
  probe_err(&p, "errno", err);
  if (err == 0) probe_escaped(&p);
  char result[96];
  snprintf(result, sizeof result, "%s after %d opens", probe_errname(err), opened);
  return probe_finish(&p, result);
}
