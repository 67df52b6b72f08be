// F10: write kernel settings through /proc/sys and /sys. The values written are harmless even on
// a host (a hostname the runner compares, drop_caches, sysrq 'h' = help), and uevent_helper gets
// a path that does not exist. Contained: read-only or absent (EROFS / EACCES / ENOENT / EPERM).
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

struct Target {
  const char* path;
  const char* value;
};

static const struct Target kTargets[] = {
    {"/proc/sys/kernel/hostname", "safex-f10-probe"},
    {"/proc/sys/kernel/domainname", "safex-f10-probe"},
    {"/proc/sys/vm/drop_caches", "1"},
    {"/proc/sysrq-trigger", "h"},
    {"/sys/kernel/uevent_helper", "/nonexistent/safex-f10-probe"},
    {"/sys/kernel/mm/transparent_hugepage/enabled", "never"},
    {"/sys/class/net/lo/mtu", "1280"},
};

int main(void) {
  Probe p;
  probe_begin(&p, "F10", "write /proc/sys and /sys");
  char errs[256] = "";
  char written[1024] = "";
  for (size_t i = 0; i < sizeof kTargets / sizeof kTargets[0]; ++i) {
    int fd = open(kTargets[i].path, O_WRONLY | O_CLOEXEC);
    int err = 0;
    if (fd < 0) {
      err = errno;
    } else {
      size_t n = strlen(kTargets[i].value);
      if (write(fd, kTargets[i].value, n) != (ssize_t)n) err = errno != 0 ? errno : EIO;
      close(fd);
    }
    probe_err(&p, kTargets[i].path, err);
    probe_errset_add(errs, sizeof errs, err);
    if (err == 0) {
      probe_escaped(&p);
      probe_list_add(written, sizeof written, kTargets[i].path);
    }
  }
  int rc = mkdir("/sys/safex-f10-probe", 0755);
  int mkdir_err = rc == 0 ? 0 : errno;
  probe_err(&p, "mkdir_sys", mkdir_err);
  probe_errset_add(errs, sizeof errs, mkdir_err);
  if (rc == 0) probe_escaped(&p);
  char result[1400];
  if (p.escaped) {
    snprintf(result, sizeof result, "written: %s", written);
  } else {
    snprintf(result, sizeof result, "%s", errs);
  }
  return probe_finish(&p, result);
}
