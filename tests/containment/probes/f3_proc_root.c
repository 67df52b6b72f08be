// F3: reach the host through /proc/<pid>/root and /proc/<pid>/cwd. argv[1] is an absolute host
// path of a canary file the runner created. Tries /proc/<pid>/root<canary> for every visible pid,
// and walks up from /proc/<pid>/cwd. Contained: own pid namespace only (few pids, pid 1 is the
// sandbox's own), the canary unreachable.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

int main(int argc, char** argv) {
  if (argc < 2) return kProbeError;
  const char* canary = argv[1];
  Probe p;
  probe_begin(&p, "F3", "reach the host through /proc/*/root and /proc/*/cwd");
  DIR* d = opendir("/proc");
  int pids = 0, max_pid = 0;
  char reached[1024] = "";
  if (d != NULL) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      int pid = atoi(e->d_name);
      if (pid <= 0) continue;
      ++pids;
      if (pid > max_pid) max_pid = pid;
      char path[4300];
      snprintf(path, sizeof path, "/proc/%d/root%s", pid, canary);
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        close(fd);
        probe_escaped(&p);
        probe_list_add(reached, sizeof reached, path);
      }
      // cwd, then up as far as it goes: the canary at the top would be the host's root.
      snprintf(path, sizeof path, "/proc/%d/cwd/../../../../../../../..%s", pid, canary);
      fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        close(fd);
        probe_escaped(&p);
        probe_list_add(reached, sizeof reached, path);
      }
    }
    closedir(d);
  }
  char link[4096];
  ssize_t n = readlink("/proc/1/root", link, sizeof link - 1);
  probe_str(&p, "pid1_root", n >= 0 ? (link[n] = 0, link) : probe_errname(errno));
  char cmd[256];
  int fd = open("/proc/1/cmdline", O_RDONLY | O_CLOEXEC);
  ssize_t c = fd >= 0 ? read(fd, cmd, sizeof cmd - 1) : -1;
  if (fd >= 0) close(fd);
  if (c < 0) c = 0;
  for (ssize_t i = 0; i < c; ++i) {
    if (cmd[i] == 0) cmd[i] = ' ';
  }
  probe_strn(&p, "pid1_cmdline", cmd, (size_t)c);
  probe_int(&p, "pids_visible", pids);
  probe_int(&p, "max_pid", max_pid);
  probe_int(&p, "self_pid", getpid());
  probe_str(&p, "reached", reached);
  char result[1200];
  if (p.escaped) {
    snprintf(result, sizeof result, "host reached: %s", reached);
  } else {
    snprintf(result, sizeof result, "ENOENT; %d pids visible, pid 1 is the probe's own", pids);
  }
  return probe_finish(&p, result);
}
