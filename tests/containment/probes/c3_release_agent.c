// C3: the cgroup release_agent escape (CVE-2022-0492 shape): find a cgroupfs, or mount one,
// and write release_agent / notify_on_release. Contained: no cgroupfs mounted writable inside,
// mount EPERM, every write refused.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "probe.h"

static Probe p;
static char errs[256];
static char written[1024];

static void TryWrite(const char* path, const char* value) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) {
    if (write(fd, value, strlen(value)) < 0) err = errno;
    close(fd);
  }
  probe_err(&p, path, err);
  probe_errset_add(errs, sizeof errs, err);
  if (err == 0) {
    probe_escaped(&p);
    probe_list_add(written, sizeof written, path);
  }
}

int main(void) {
  probe_begin(&p, "C3", "cgroup release_agent escape");
  // cgroup filesystems visible in this mount namespace.
  int cgroup_mounts = 0;
  int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    static char buf[1 << 16];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    for (char* s = buf; (s = strstr(s, " - cgroup")) != NULL; ++s) ++cgroup_mounts;
  }
  probe_int(&p, "cgroup_mounts", cgroup_mounts);
  mkdir("/tmp/safex-c3", 0700);
  int rc = mount("cgroup", "/tmp/safex-c3", "cgroup", 0, "memory");
  int mount_err = rc == 0 ? 0 : errno;
  probe_err(&p, "mount_cgroup_v1", mount_err);
  probe_errset_add(errs, sizeof errs, mount_err);
  if (rc == 0) {
    probe_escaped(&p);
    TryWrite("/tmp/safex-c3/release_agent", "/nonexistent/safex-c3-probe");
  }
  rc = mount("cgroup2", "/tmp/safex-c3", "cgroup2", 0, NULL);
  int mount2_err = rc == 0 ? 0 : errno;
  probe_err(&p, "mount_cgroup2", mount2_err);
  probe_errset_add(errs, sizeof errs, mount2_err);
  if (rc == 0) probe_escaped(&p);
  // Whatever /sys/fs/cgroup offers.
  TryWrite("/sys/fs/cgroup/release_agent", "/nonexistent/safex-c3-probe");
  DIR* d = opendir("/sys/fs/cgroup");
  if (d != NULL) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char path[600];
      snprintf(path, sizeof path, "/sys/fs/cgroup/%s/release_agent", e->d_name);
      TryWrite(path, "/nonexistent/safex-c3-probe");
      snprintf(path, sizeof path, "/sys/fs/cgroup/%s/notify_on_release", e->d_name);
      TryWrite(path, "1");
    }
    closedir(d);
  }
  char result[1300];
  snprintf(result, sizeof result, p.escaped ? "written: %s" : "%s", p.escaped ? written : errs);
  return probe_finish(&p, result);
}
