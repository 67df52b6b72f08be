// N4: the host's loopback services, the supervisor's socket, abstract unix sockets. argv:
// endpoints the runner listens on (tcp on 127.0.0.1, a unix socket path, an abstract name);
// the probe adds the supervisor's and common runtimes' socket paths (unless the first argument is
// --no-defaults: the self-test, which runs on the host). Contained: none connects.
#include "probe_net.h"

static const char* const kDefaults[] = {
    "unix:/run/safex/safex.sock",           "unix:/var/run/docker.sock",
    "unix:/run/containerd/containerd.sock", "unix:/run/systemd/private",
    "abstract:/tmp/.X11-unix/X0",           "tcp:127.0.0.1:22",
};

int main(int argc, char** argv) {
  Probe p;
  probe_begin(&p, "N4", "host loopback, supervisor socket, abstract unix sockets");
  char errs[256] = "";
  char reached[1024] = "";
  int first = 1, n = (int)(sizeof kDefaults / sizeof kDefaults[0]);
  if (argc > 1 && strcmp(argv[1], "--no-defaults") == 0) {
    first = 2;
    n = 0;
  }
  int given = argc - first;
  for (int i = 0; i < n + given; ++i) {
    const char* spec = i < given ? argv[first + i] : kDefaults[i - given];
    int err = probe_reach(spec, "safex-n4", 8, 1000, NULL);
    probe_err(&p, spec, err);
    probe_errset_add(errs, sizeof errs, err);
    if (err == 0) {
      probe_escaped(&p);
      probe_list_add(reached, sizeof reached, spec);
    }
  }
  char result[1300];
  snprintf(result, sizeof result, p.escaped ? "reached: %s" : "%s", p.escaped ? reached : errs);
  return probe_finish(&p, result);
}
