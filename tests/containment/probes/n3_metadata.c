// N3: the cloud metadata service, from a run that was granted some egress. argv: endpoints; the
// runner passes the metadata addresses only when it has set up a test world in which they answer
// (tests/net/net_world.h) - they are never sent to the machine's real network.
// Contained: unreachable.
#include "probe_net.h"

int main(int argc, char** argv) {
  Probe p;
  probe_begin(&p, "N3", "cloud metadata with some egress granted");
  char errs[256] = "";
  for (int i = 1; i < argc; ++i) {
    int err = probe_reach(argv[i], "GET / HTTP/1.0\r\n\r\n", 18, 2000, NULL);
    probe_err(&p, argv[i], err);
    probe_errset_add(errs, sizeof errs, err);
    if (err == 0) probe_escaped(&p);
  }
  return probe_finish(&p, errs);
}
