// F7: hardlink a host file into the output. argv: OUTPUT_DIR and host-visible files to link from
// (a read-only bind such as /usr/bin/env, a file in scratch /tmp). Contained: EXDEV (the output is
// its own filesystem) for every foreign file; a second name made inside the output itself is
// refused at collection (nlink > 1; checked by the runner).
#include <fcntl.h>

#include "probe.h"

int main(int argc, char** argv) {
  if (argc < 3) return kProbeError;
  const char* out = argv[1];
  Probe p;
  probe_begin(&p, "F7", "hardlink a host file into the output");
  char errs[256] = "";
  // A file in scratch, to try as well.
  int fd = open("/tmp/safex-f7-scratch", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
  for (int i = 2; i <= argc; ++i) {
    const char* from = i < argc ? argv[i] : "/tmp/safex-f7-scratch";
    char to[4096];
    snprintf(to, sizeof to, "%s/link%d", out, i);
    int rc = link(from, to);
    int err = rc == 0 ? 0 : errno;
    probe_err(&p, from, err);
    probe_errset_add(errs, sizeof errs, err);
    if (rc == 0) probe_escaped(&p);
  }
  // Inside the output itself: allowed by the kernel, refused by collection.
  char own[4096], declared[4096];
  snprintf(own, sizeof own, "%s/own.json", out);
  snprintf(declared, sizeof declared, "%s/result.json", out);
  fd = open(own, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) {
    if (write(fd, "{}\n", 3) != 3) return kProbeError;
    close(fd);
  }
  int rc = link(own, declared);
  probe_err(&p, "inside_output", rc == 0 ? 0 : errno);
  char result[300];
  snprintf(result, sizeof result, "%s from other filesystems", errs);
  return probe_finish(&p, result);
}
