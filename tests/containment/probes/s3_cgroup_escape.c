// S3: move itself out of its cgroup: write its pid to every cgroup.procs / tasks it can find
// under /sys/fs/cgroup (v1 and v2 layouts) and mkdir a new cgroup. Contained: all refused
// (EROFS / ENOENT / EACCES / EPERM); /proc/self/cgroup reported for the record.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

static Probe p;
static char errs[256];
static char moved[1024];

static void TryWrite(const char* path) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  int err = 0;
  if (fd < 0) {
    err = errno;
  } else {
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (write(fd, pid, (size_t)n) != n) err = errno != 0 ? errno : EIO;
    close(fd);
  }
  probe_err(&p, path, err);
  probe_errset_add(errs, sizeof errs, err);
  if (err == 0) {
    probe_escaped(&p);
    probe_list_add(moved, sizeof moved, path);
  }
}

int main(void) {
  probe_begin(&p, "S3", "move itself out of its cgroup");
  char self[1024];
  int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, self, sizeof self - 1) : -1;
  if (fd >= 0) close(fd);
  probe_strn(&p, "proc_self_cgroup", self, n > 0 ? (size_t)n : 0);
  TryWrite("/sys/fs/cgroup/cgroup.procs");
  TryWrite("/sys/fs/cgroup/tasks");
  DIR* d = opendir("/sys/fs/cgroup");
  int hierarchies = 0;
  if (d != NULL) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char path[600];
      snprintf(path, sizeof path, "/sys/fs/cgroup/%s/cgroup.procs", e->d_name);
      ++hierarchies;
      TryWrite(path);
    }
    closedir(d);
  }
  probe_int(&p, "cgroup_dirs_listed", hierarchies);
  int rc = mkdir("/sys/fs/cgroup/safex-s3-probe", 0755);
  int mk = rc == 0 ? 0 : errno;
  probe_err(&p, "mkdir_cgroup", mk);
  probe_errset_add(errs, sizeof errs, mk);
  if (rc == 0) probe_escaped(&p);
  char result[1200];
  snprintf(result, sizeof result, p.escaped ? "moved via %s" : "%s", p.escaped ? moved : errs);
  return probe_finish(&p, result);
}
