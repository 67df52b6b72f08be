// F6: swap the output path for a symlink while it is being collected. Writes a valid result
// file, then leaves a detached process that keeps replacing it - by rename(2), atomically - with a
// symlink to a host file (argv[1]) and back with a fresh copy of the valid file, as fast as it
// can, and exits. Contained: collection happens after every process of
// the run is gone and is fd-relative: the file is either collected as the regular file it was, or
// refused as a symlink; the host file is untouched (runner).
#include <fcntl.h>
#include <signal.h>

#include "probe.h"

int main(int argc, char** argv) {
  if (argc < 3) return kProbeError;
  const char* target = argv[1];
  const char* output = argv[2];  // e.g. /data/out/result.json
  char link_path[4096], file_path[4096];
  snprintf(link_path, sizeof link_path, "%s.link", output);
  snprintf(file_path, sizeof file_path, "%s.file", output);
  Probe p;
  probe_begin(&p, "F6", "swap the output for a symlink during collection");
  int fd = open(output, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return kProbeError;
  const char json[] = "{\"ok\":true}\n";
  if (write(fd, json, sizeof json - 1) != (ssize_t)(sizeof json - 1)) return kProbeError;
  close(fd);
  int rc = symlink(target, link_path);
  probe_err(&p, "symlink", rc == 0 ? 0 : errno);
  unlink(link_path);
  // One swap by hand, to report whether the filesystem allows it at all.
  int swap_err = 0;
  if (symlink(target, link_path) != 0 || rename(link_path, output) != 0) swap_err = errno;
  probe_err(&p, "swap", swap_err);
  pid_t pid = fork();
  if (pid == 0) {
    setsid();
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    if (fork() != 0) _exit(0);
    for (unsigned long i = 0;; ++i) {
      if (i & 1) {
        int f = open(file_path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
        if (f >= 0) {
          ssize_t w = write(f, json, sizeof json - 1);
          (void)w;
          close(f);
          rename(file_path, output);
        }
      } else if (symlink(target, link_path) == 0) {
        rename(link_path, output);
      }
    }
  }
  // Let the swapper get going, then end the run with it still swapping.
  usleep(300 * 1000);
  return probe_finish(&p, swap_err == 0 ? "swapper left running" : "swap failed");
}
