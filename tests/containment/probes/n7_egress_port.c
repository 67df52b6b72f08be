// N7: with egress granted to one host:port, try that pair and then other ports of the same host
// (and the same port over UDP). argv[1]: the granted endpoint; the rest: the others. Contained:
// only the granted pair connects.
#include "probe_net.h"

int main(int argc, char** argv) {
  if (argc < 3) return kProbeError;
  Probe p;
  probe_begin(&p, "N7", "granted host:port, then other ports of the same host");
  int granted = probe_reach(argv[1], "", 0, 3000, NULL);
  probe_err(&p, "granted", granted);
  char errs[256] = "";
  for (int i = 2; i < argc; ++i) {
    int err = probe_reach(argv[i], "safex-n7", 8, 1500, NULL);
    probe_err(&p, argv[i], err);
    probe_errset_add(errs, sizeof errs, err);
    if (err == 0) probe_escaped(&p);
  }
  char result[300];
  snprintf(result, sizeof result, "granted pair %s; other ports %s", probe_errname(granted), errs);
  return probe_finish(&p, result);
}
