// C1: overwrite the runtime through /proc/self/exe (the CVE-2019-5736 shape): open
// /proc/self/exe and every /proc/<pid>/exe for writing, re-open an O_PATH-less read fd of it
// through /proc/self/fd for writing, and open the runtime binaries named in argv (the runner
// passes runsc and safex) for writing. Nothing is ever written: a successful open is the escape.
// Contained: every open fails and the runtime binaries are unreachable (ENOENT); the runner
// compares their hashes.
#include <dirent.h>
#include <fcntl.h>

#include "probe.h"

static Probe p;
static char errs[256];
static char opened[1024];

static void TryOpen(const char* key, const char* path) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  probe_err(&p, key, err);
  probe_errset_add(errs, sizeof errs, err);
  if (err == 0) {
    probe_escaped(&p);
    probe_list_add(opened, sizeof opened, path);
  }
}

int main(int argc, char** argv) {
  probe_begin(&p, "C1", "overwrite the runtime via /proc/self/exe");
  char link[4096];
  ssize_t n = readlink("/proc/self/exe", link, sizeof link - 1);
  link[n > 0 ? n : 0] = 0;
  probe_str(&p, "self_exe", link);
  TryOpen("/proc/self/exe", "/proc/self/exe");
  int rfd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (rfd >= 0) {
    char via[64];
    snprintf(via, sizeof via, "/proc/self/fd/%d", rfd);
    TryOpen("reopen_via_fd", via);
    close(rfd);
  }
  DIR* d = opendir("/proc");
  if (d != NULL) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      int pid = atoi(e->d_name);
      if (pid <= 0 || pid == getpid()) continue;
      char path[64];
      snprintf(path, sizeof path, "/proc/%d/exe", pid);
      TryOpen(path, path);
    }
    closedir(d);
  }
  for (int i = 1; i < argc; ++i) TryOpen(argv[i], argv[i]);
  char result[1300];
  snprintf(result, sizeof result, p.escaped ? "opened for writing: %s" : "%s",
           p.escaped ? opened : errs);
  return probe_finish(&p, result);
}
