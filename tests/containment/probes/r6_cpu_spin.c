// R6: spin on many threads (8 threads and the main one) forever. Contained: killed at the CPU
// limit (or the wall-time limit on a loaded host), the verdict names the limit, and the CPU time
// used stays within the plan's CPU rate (cpus) times the wall time (checked by the runner).
#include <pthread.h>

#include "probe.h"

static volatile unsigned long sink;

static void* Spin(void* arg) {
  (void)arg;
  for (;;) sink++;
  return NULL;
}

int main(void) {
  probe_started("R6", "spin on 9 threads");
  for (int i = 0; i < 8; ++i) {
    pthread_t t;
    pthread_create(&t, NULL, Spin, NULL);
  }
  Spin(NULL);
  return kProbeEscaped;
}
