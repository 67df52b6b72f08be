// N5: another concurrent run's network. Two runs at once:
//   n5_cross_run listen PORT NAME SECONDS   listens on 0.0.0.0:PORT (every address the run has)
//                                           and abstract NAME; counts connections for SECONDS
//   n5_cross_run connect ENDPOINT... SECONDS  keeps trying to reach each endpoint for SECONDS
// Contained: the listener accepts nothing, the connector reaches nothing (one namespace per run).
// Both report the wall-clock window (from, until: seconds since the epoch) in which they listened
// or tried, so that the runner can tell that the two windows overlapped.
#include <time.h>

#include "probe_net.h"

static int Listen(const char* spec) {
  Endpoint ep;
  if (probe_parse_endpoint(spec, &ep) != 0) return -1;
  int fd = socket(ep.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr*)&ep.addr, ep.len) != 0 || listen(fd, 16) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int main(int argc, char** argv) {
  if (argc < 3) return kProbeError;
  Probe p;
  probe_begin(&p, "N5", "reach another concurrent run");
  int seconds = atoi(argv[argc - 1]);
  if (strcmp(argv[1], "listen") == 0 && argc == 5) {
    char tcp[64], abs_name[160];
    snprintf(tcp, sizeof tcp, "tcp:0.0.0.0:%s", argv[2]);
    snprintf(abs_name, sizeof abs_name, "abstract:%s", argv[3]);
    int fds[2] = {Listen(tcp), Listen(abs_name)};
    probe_bool(&p, "tcp_listening", fds[0] >= 0);
    probe_bool(&p, "abstract_listening", fds[1] >= 0);
    int accepted = 0;
    time_t start = time(NULL), end = start + seconds;
    probe_int(&p, "from", (long long)start);
    while (time(NULL) < end) {
      struct pollfd pfds[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
      if (poll(pfds, 2, 200) > 0) {
        for (int i = 0; i < 2; ++i) {
          if (pfds[i].revents & POLLIN) {
            int c = accept(fds[i], NULL, NULL);
            if (c >= 0) {
              ++accepted;
              close(c);
            }
          }
        }
      }
    }
    probe_int(&p, "until", (long long)time(NULL));
    probe_int(&p, "accepted", accepted);
    if (accepted > 0) probe_escaped(&p);
    char result[64];
    snprintf(result, sizeof result, "listener accepted %d", accepted);
    return probe_finish(&p, result);
  }
  if (strcmp(argv[1], "connect") == 0) {
    char errs[256] = "";
    time_t start = time(NULL), end = start + seconds;
    probe_int(&p, "from", (long long)start);
    int last[64] = {0};
    int n = argc - 3 < 64 ? argc - 3 : 64;
    do {
      for (int i = 0; i < n; ++i) {
        last[i] = probe_reach(argv[2 + i], "safex-n5", 8, 250, NULL);
        if (last[i] == 0) probe_escaped(&p);
      }
      usleep(200 * 1000);
    } while (time(NULL) < end && !p.escaped);
    probe_int(&p, "until", (long long)time(NULL));
    for (int i = 0; i < n; ++i) {
      probe_err(&p, argv[2 + i], last[i]);
      probe_errset_add(errs, sizeof errs, last[i]);
    }
    return probe_finish(&p, errs);
  }
  return kProbeError;
}
