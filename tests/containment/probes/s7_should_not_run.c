// S7: the program of a run that must be refused before anything runs (backend missing or broken,
// audit log unwritable, cgroups unwritable). If it runs at all, it says so.
#include "probe.h"

int main(void) {
  Probe p;
  probe_begin(&p, "S7", "run although the backend is broken");
  probe_escaped(&p);
  return probe_finish(&p, "ran");
}
