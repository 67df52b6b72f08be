// F2: read /proc/self/environ and /proc/1/environ. argv[1] is a marker the runner put in the
// supervisor's own environment. Reports the variable names seen; contained when the marker is
// nowhere (the runner also checks the names are exactly the policy's).
#include <fcntl.h>

#include "probe.h"

static void ReadEnviron(Probe* p, const char* path, const char* key, const char* marker) {
  static char buf[1 << 16];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  char names[4096] = "";
  if (fd < 0) {
    char k[128];
    snprintf(k, sizeof k, "%s_errno", key);
    probe_err(p, k, errno);
    return;
  }
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n < 0) n = 0;
  buf[n] = 0;
  for (ssize_t i = 0; i < n;) {
    const char* var = buf + i;
    size_t len = strlen(var);
    if (marker[0] != 0 && strstr(var, marker) != NULL) probe_escaped(p);
    const char* eq = strchr(var, '=');
    char name[256];
    size_t nl = eq != NULL ? (size_t)(eq - var) : len;
    if (nl >= sizeof name) nl = sizeof name - 1;
    memcpy(name, var, nl);
    name[nl] = 0;
    probe_list_add(names, sizeof names, name);
    i += (ssize_t)len + 1;
  }
  probe_str(p, key, names);
}

int main(int argc, char** argv) {
  const char* marker = argc > 1 ? argv[1] : "";
  Probe p;
  probe_begin(&p, "F2", "read /proc/self/environ and /proc/1/environ");
  ReadEnviron(&p, "/proc/self/environ", "self", marker);
  ReadEnviron(&p, "/proc/1/environ", "pid1", marker);
  for (char** e = __environ; *e != NULL; ++e) {
    if (marker[0] != 0 && strstr(*e, marker) != NULL) probe_escaped(&p);
  }
  return probe_finish(&p, p.escaped ? "host variable visible" : "only the policy's variables");
}
