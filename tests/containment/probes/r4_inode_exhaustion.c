// R4: inode exhaustion. Creates empty files in each DIR until creation fails, at most
// kMaxFiles or kBudgetSeconds per directory. Contained: ENOSPC at the mount's inode cap.
// Reaching kMaxFiles means there is no cap that small (reported; the runner decides).
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "probe.h"

enum { kMaxFiles = 300000, kBudgetSeconds = 4 };

int main(int argc, char** argv) {
  if (argc < 2) return kProbeError;
  Probe p;
  probe_begin(&p, "R4", "create empty files until the inode cap");
  char summary[512] = "";
  for (int i = 1; i < argc; ++i) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/safex-r4", argv[i]);
    int err = 0, files = 0;
    const char* stop = "error";
    if (mkdir(dir, 0700) != 0) {
      err = errno;
    } else {
      time_t start = time(NULL);
      stop = "max_files";
      for (; files < kMaxFiles; ++files) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%d", dir, files);
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0) {
          err = errno;
          stop = "error";
          break;
        }
        close(fd);
        if ((files & 1023) == 0 && time(NULL) - start >= kBudgetSeconds) {
          stop = "time_budget";
          break;
        }
      }
    }
    char key[4200];
    snprintf(key, sizeof key, "%s_files", argv[i]);
    probe_int(&p, key, files);
    snprintf(key, sizeof key, "%s_errno", argv[i]);
    probe_err(&p, key, err);
    snprintf(key, sizeof key, "%s_stop", argv[i]);
    probe_str(&p, key, stop);
    char part[256];
    snprintf(part, sizeof part, "%s %s after %d files", argv[i],
             err != 0 ? probe_errname(err) : stop, files);
    probe_list_add(summary, sizeof summary, part);
  }
  return probe_finish(&p, summary);
}
