// N3: the cloud metadata service, from a run that was granted some egress. argv[1]: the granted
// endpoint (reached first, to show the run does have egress); the rest: metadata endpoints. The
// runner passes the metadata addresses only when runs egress through its own test world
// (tests/net/net_world.h), where something answers at 169.254.169.254 - nothing is ever sent to
// the machine's real network. Contained: the granted endpoint answers, the metadata ones do not.
#include "probe_net.h"

int main(int argc, char** argv) {
  Probe p;
  probe_begin(&p, "N3", "cloud metadata with some egress granted");
  char errs[256] = "";
  if (argc < 3) return kProbeError;
  int granted = probe_reach(argv[1], "", 0, 3000, NULL);
  probe_err(&p, "granted", granted);
  for (int i = 2; i < argc; ++i) {
    int err = probe_reach(argv[i], "GET / HTTP/1.0\r\n\r\n", 18, 2000, NULL);
    probe_err(&p, argv[i], err);
    probe_errset_add(errs, sizeof errs, err);
    if (err == 0) probe_escaped(&p);
  }
  char result[300];
  snprintf(result, sizeof result, "granted %s; metadata %s", probe_errname(granted), errs);
  return probe_finish(&p, result);
}
