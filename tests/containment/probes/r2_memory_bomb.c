// R2: memory bomb. Modes:
//   heap            allocate and touch 16 MiB blocks up to 8 GiB (expected: killed at the run's
//                   memory limit; the line says "started", a second line only if it survived)
//   fill DIR...     write a file in each DIR (tmpfs /tmp, /dev/shm) 1 MiB at a time up to 1 GiB
//                   and report where it stopped (expected: ENOSPC at the tmpfs size, or
//                   EACCES/ENOENT for a /dev/shm that is not there or not writable)
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>

#include "probe.h"

int main(int argc, char** argv) {
  if (argc < 2) return kProbeError;
  signal(SIGXFSZ, SIG_IGN);
  if (strcmp(argv[1], "heap") == 0) {
    probe_started("R2", "allocate and touch 8 GiB");
    size_t total = 0;
    const size_t block = 16u << 20;
    while (total < (8ull << 30)) {
      char* m = mmap(NULL, block, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) break;
      memset(m, 0x5a, block);
      total += block;
    }
    Probe p;
    probe_begin(&p, "R2", "allocate and touch 8 GiB");
    probe_int(&p, "allocated_mib", (long long)(total >> 20));
    probe_escaped(&p);  // still alive with this much touched: the limit did not hold
    return probe_finish(&p, "survived");
  }
  if (strcmp(argv[1], "fill") == 0) {
    Probe p;
    probe_begin(&p, "R2", "fill tmpfs and /dev/shm");
    static char chunk[1 << 20];
    memset(chunk, 0x5a, sizeof chunk);
    char summary[512] = "";
    for (int i = 2; i < argc; ++i) {
      char path[4096];
      snprintf(path, sizeof path, "%s/safex-r2-fill", argv[i]);
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
      char key[64];
      snprintf(key, sizeof key, "%s_mib", argv[i]);
      probe_int(&p, key, written >> 20);
      snprintf(key, sizeof key, "%s_errno", argv[i]);
      probe_err(&p, key, err);
      if (err == 0) probe_escaped(&p);  // 1 GiB went in without a limit
      char part[256];
      snprintf(part, sizeof part, "%s %s@%lldMiB", argv[i], probe_errname(err), written >> 20);
      probe_list_add(summary, sizeof summary, part);
    }
    return probe_finish(&p, summary);
  }
  return kProbeError;
}
