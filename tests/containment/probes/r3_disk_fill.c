// R3: fill the scratch space. Writes a file in each DIR 1 MiB at a time, up to 1 GiB, with
// SIGXFSZ ignored so a file-size limit shows as EFBIG. Contained: each stops at its cap
// (ENOSPC at the tmpfs / output mount size, or EFBIG at the disk limit), and the host's free
// space is unchanged (checked by the runner).
#include <fcntl.h>
#include <signal.h>

#include "probe.h"

int main(int argc, char** argv) {
  if (argc < 2) return kProbeError;
  signal(SIGXFSZ, SIG_IGN);
  Probe p;
  probe_begin(&p, "R3", "fill scratch and output space");
  static char chunk[1 << 20];
  memset(chunk, 0xa5, sizeof chunk);
  char summary[512] = "";
  for (int i = 1; i < argc; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/safex-r3-fill", argv[i]);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
    long long written = 0;
    int err = 0;
    if (fd < 0) {
      err = errno;
    } else {
      while (written < (1ll << 30)) {
        ssize_t n = write(fd, chunk, sizeof chunk);
        if (n < 0) {
          err = errno;
          break;
        }
        written += n;
      }
      close(fd);
      unlink(path);
    }
    char key[4200];
    snprintf(key, sizeof key, "%s_bytes", argv[i]);
    probe_int(&p, key, written);
    snprintf(key, sizeof key, "%s_errno", argv[i]);
    probe_err(&p, key, err);
    if (err == 0) probe_escaped(&p);
    char part[256];
    snprintf(part, sizeof part, "%s %s@%lldMiB", argv[i], probe_errname(err), written >> 20);
    probe_list_add(summary, sizeof summary, part);
  }
  return probe_finish(&p, summary);
}
