// R1: fork bomb, then thread bomb. Children and threads block until told to go; the probe counts
// how many it got before fork/pthread_create failed. Contained: both stop well short of
// kMaxTries with EAGAIN (the pids limit), and nothing of the run is left afterwards (runner).
// With --fail-at-limit the probe then exits 3, as a real program whose fork failed would (the run's
// verdict then names the limit); without it, it copes and exits 0.
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "probe.h"

enum { kMaxTries = 2048 };

static int go_pipe[2];

static void* Blocked(void* arg) {
  (void)arg;
  char c;
  while (read(go_pipe[0], &c, 1) < 0 && errno == EINTR) {
  }
  return NULL;
}

enum { kGaveUpAtLimit = 3 };

int main(int argc, char** argv) {
  int fail_at_limit = argc > 1 && strcmp(argv[1], "--fail-at-limit") == 0;
  Probe p;
  probe_begin(&p, "R1", "fork and thread bomb");
  static pid_t kids[kMaxTries];
  int forks = 0, fork_err = 0;
  for (; forks < kMaxTries; ++forks) {
    pid_t pid = fork();
    if (pid == 0) {
      pause();
      _exit(0);
    }
    if (pid < 0) {
      fork_err = errno;
      break;
    }
    kids[forks] = pid;
  }
  for (int i = 0; i < forks; ++i) kill(kids[i], SIGKILL);
  for (int i = 0; i < forks; ++i) waitpid(kids[i], NULL, 0);

  if (pipe(go_pipe) != 0) return kProbeError;
  static pthread_t threads[kMaxTries];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  int nthreads = 0, thread_err = 0;
  for (; nthreads < kMaxTries; ++nthreads) {
    int rc = pthread_create(&threads[nthreads], &attr, Blocked, NULL);
    if (rc != 0) {
      thread_err = rc;
      break;
    }
  }
  close(go_pipe[1]);  // EOF releases every thread
  for (int i = 0; i < nthreads; ++i) pthread_join(threads[i], NULL);

  probe_int(&p, "forks", forks);
  probe_err(&p, "fork_errno", fork_err);
  probe_int(&p, "threads", nthreads);
  probe_err(&p, "thread_errno", thread_err);
  if (forks >= kMaxTries || nthreads >= kMaxTries) probe_escaped(&p);
  char result[128];
  snprintf(result, sizeof result, "fork %s after %d, thread %s after %d", probe_errname(fork_err),
           forks, probe_errname(thread_err), nthreads);
  int rc = probe_finish(&p, result);
  if (rc == kProbeContained && fail_at_limit && (fork_err != 0 || thread_err != 0)) {
    return kGaveUpAtLimit;
  }
  return rc;
}
