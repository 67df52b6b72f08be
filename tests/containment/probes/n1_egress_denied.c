// N1: TCP and UDP to outside addresses with the network denied. argv: endpoints (probe_net.h),
// chosen by the runner: its own listeners on the host's loopback and 198.18.0.0/15 addresses.
// Contained: nothing connects or answers (ENETUNREACH / ECONNREFUSED / ETIMEDOUT); the runner
// checks that its listeners saw nothing.
#include "probe_net.h"

int main(int argc, char** argv) {
  Probe p;
  probe_begin(&p, "N1", "TCP and UDP to outside addresses, network denied");
  char errs[256] = "";
  for (int i = 1; i < argc; ++i) {
    int sent = 0;
    int err = probe_reach(argv[i], "safex-n1", 8, 1500, &sent);
    probe_err(&p, argv[i], err);
    probe_errset_add(errs, sizeof errs, err);
    if (err == 0) probe_escaped(&p);
  }
  return probe_finish(&p, errs);
}
