// S1: descriptors inherited from the supervisor. Lists every open descriptor and what it is.
// Contained: only 0, 1 and 2 (the runner leaks extra descriptors into `safex` on purpose).
#include <fcntl.h>
#include <sys/resource.h>

#include "probe.h"

int main(void) {
  Probe p;
  probe_begin(&p, "S1", "use descriptors inherited from the supervisor");
  char list[2048] = "";
  int extra = 0;
  struct rlimit rl;
  int max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (int)rl.rlim_cur : 65536;
  for (int fd = 0; fd < max; ++fd) {
    if (fcntl(fd, F_GETFD) == -1) continue;
    char path[64], target[512];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    target[n > 0 ? n : 0] = 0;
    char item[600];
    snprintf(item, sizeof item, "%d=%s", fd, target);
    probe_list_add(list, sizeof list, item);
    if (fd > 2) {
      ++extra;
      probe_escaped(&p);
    }
  }
  probe_str(&p, "fds", list);
  probe_int(&p, "extra", extra);
  char result[2100];
  if (extra > 0) {
    snprintf(result, sizeof result, "%d extra fds: %s", extra, list);
  } else {
    snprintf(result, sizeof result, "only 0,1,2");
  }
  return probe_finish(&p, result);
}
