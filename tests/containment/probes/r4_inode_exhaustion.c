// R4: inode exhaustion. Creates empty files in each DIR until creation fails, at most kMaxFiles
// per directory (and, unless --budget 0, at most --budget seconds per directory; default 4).
// Contained: ENOSPC at the mount's inode cap - or, where the sandbox's tmpfs has no inode cap of
// its own and its inodes are the sandbox kernel's memory (gVisor's Sentry), the run killed at its
// memory limit (the runner decides which applies, from the verdict and the backend).
//   r4_inode_exhaustion [--progress] [--budget SECONDS] DIR...
// --progress: a full result line every kProgressEvery files (a probe that is killed mid-attack
// still leaves its last line: how many files it had made by then, and that no error came).
// Reaching kMaxFiles means there is no cap that small (reported; the runner decides).
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "probe.h"

enum { kMaxFiles = 300000, kProgressEvery = 4096 };

// A progress line: the directories finished so far, and the one being filled.
static void Progress(const char* finished, const char* current, int files) {
  Probe p;
  probe_begin(&p, "R4", "create empty files until the inode cap");
  probe_str(&p, "finished", finished);
  probe_str(&p, "in_progress", current);
  probe_int(&p, "in_progress_files", files);
  char result[900];
  snprintf(result, sizeof result, "%s%s%s: %d files so far, no error yet", finished,
           finished[0] ? "," : "", current, files);
  probe_finish(&p, result);
}

int main(int argc, char** argv) {
  int progress = 0, budget = 4, first = 1;
  for (; first < argc && argv[first][0] == '-'; ++first) {
    if (strcmp(argv[first], "--progress") == 0) {
      progress = 1;
    } else if (strcmp(argv[first], "--budget") == 0 && first + 1 < argc) {
      budget = atoi(argv[++first]);
    } else {
      return kProbeError;
    }
  }
  if (first >= argc) return kProbeError;
  Probe p;
  probe_begin(&p, "R4", "create empty files until the inode cap");
  char summary[512] = "";
  for (int i = first; i < argc; ++i) {
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
        if (files > 0 && files % kProgressEvery == 0) {
          if (progress) Progress(summary, argv[i], files);
          if (budget > 0 && time(NULL) - start >= budget) {
            stop = "time_budget";
            break;
          }
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
