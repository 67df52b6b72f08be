/* Inside a raw runsc sandbox (bench/gvisor/exec_after_idle.py): sleeps IDLE seconds, then times
 * N fork + exec of PROGRAM, each from the fork to the first byte of its stdout and to its exit,
 * as the Sentry sees them (CLOCK_MONOTONIC inside the sandbox). One line per exec on stderr:
 * "exec I FIRST_BYTE_MS EXIT_MS". Usage: exec_timer IDLE N PROGRAM [ARG...] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  sleep((unsigned)atoi(argv[1]));
  const int n = atoi(argv[2]);
  for (int i = 0; i < n; i++) {
    int p[2];
    if (pipe(p) != 0) return 1;
    const double start = now_ms();
    const pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
      dup2(p[1], 1);
      close(p[0]);
      execv(argv[3], argv + 3);
      _exit(127);
    }
    close(p[1]);
    char byte;
    const double first = read(p[0], &byte, 1) == 1 ? now_ms() : -1;
    int status;
    waitpid(child, &status, 0);
    const double end = now_ms();
    close(p[0]);
    fprintf(stderr, "exec %d %.2f %.2f\n", i, first - start, end - start);
  }
  return 0;
}
