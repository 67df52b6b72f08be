// F4: write outside scratch. Each argument is a path: a new file is created there (O_EXCL), or,
// with a leading '=', an existing file is opened for writing and "pwned" written to it.
// Contained: every attempt fails (EROFS / EACCES / ENOENT); the runner checks the host files.
#include <fcntl.h>

#include "probe.h"

int main(int argc, char** argv) {
  Probe p;
  probe_begin(&p, "F4", "write outside scratch");
  char errs[256] = "";
  char written[2048] = "";
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    int overwrite = arg[0] == '=';
    const char* path = overwrite ? arg + 1 : arg;
    int fd = overwrite ? open(path, O_WRONLY | O_CLOEXEC)
                       : open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    int err = 0;
    if (fd < 0) {
      err = errno;
    } else {
      if (write(fd, "pwned\n", 6) != 6) err = errno != 0 ? errno : EIO;
      close(fd);
    }
    probe_err(&p, path, err);
    probe_errset_add(errs, sizeof errs, err);
    if (err == 0) {
      probe_escaped(&p);
      probe_list_add(written, sizeof written, path);
    }
  }
  char result[2200];
  if (p.escaped) {
    snprintf(result, sizeof result, "written: %s", written);
  } else {
    snprintf(result, sizeof result, "%s (%d paths)", errs, argc - 1);
  }
  return probe_finish(&p, result);
}
