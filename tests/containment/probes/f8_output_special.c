// F8: the declared output is not a regular file. Modes (argv[1]) on the path argv[2]:
//   fifo    a FIFO (a reader that opens it would block)
//   device  a character device (mknod of /dev/null's numbers; expected EPERM)
//   sparse  a sparse file of 1 TiB (expected EFBIG at the disk limit), then one of 60 MiB
//           (under the disk limit, over the validator's max): refused before reading
// The runner checks what collection did with it.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "probe.h"

int main(int argc, char** argv) {
  if (argc < 3) return kProbeError;
  signal(SIGXFSZ, SIG_IGN);
  const char* mode = argv[1];
  const char* path = argv[2];
  Probe p;
  probe_begin(&p, "F8", "output is a FIFO, a device or a huge sparse file");
  probe_str(&p, "mode", mode);
  char result[200];
  if (strcmp(mode, "fifo") == 0) {
    int rc = mkfifo(path, 0644);
    probe_err(&p, "mkfifo", rc == 0 ? 0 : errno);
    snprintf(result, sizeof result, "mkfifo %s", probe_errname(rc == 0 ? 0 : errno));
  } else if (strcmp(mode, "device") == 0) {
    int rc = mknod(path, S_IFCHR | 0666, makedev(1, 3));
    int err = rc == 0 ? 0 : errno;
    probe_err(&p, "mknod", err);
    if (rc == 0) probe_escaped(&p);
    snprintf(result, sizeof result, "mknod %s", probe_errname(err));
  } else if (strcmp(mode, "sparse") == 0) {
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return kProbeError;
    int rc = ftruncate(fd, 1ll << 40);
    int err_tib = rc == 0 ? 0 : errno;
    probe_err(&p, "truncate_1tib", err_tib);
    if (rc == 0) probe_escaped(&p);
    rc = ftruncate(fd, 60ll << 20);
    int err_60 = rc == 0 ? 0 : errno;
    probe_err(&p, "truncate_60mib", err_60);
    close(fd);
    snprintf(result, sizeof result, "1 TiB: %s; 60 MiB sparse: %s", probe_errname(err_tib),
             probe_errname(err_60));
  } else {
    return kProbeError;
  }
  return probe_finish(&p, result);
}
