// F1: read host secrets: /etc/shadow, /root, SSH host keys, the audit DB and key, the
// supervisor's state, and any unix socket. Extra paths to try come from argv (the runner passes
// its own secret canary and the audit log it uses). Contained: none of them is present.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

static const char* const kDefaults[] = {
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/root",
    "/root/.ssh/authorized_keys",
    "/etc/ssh/ssh_host_ed25519_key",
    "/home",
    "/var/lib/safex/audit.db",
    "/var/lib/safex/audit.key",
    "/etc/safex",
    "/run/safex",
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/systemd/private",
};

static int sockets_found;
static char socket_list[1024];

// Looks for unix sockets below `dir` (bounded depth and count).
static void FindSockets(const char* dir, int depth) {
  if (depth > 4) return;
  DIR* d = opendir(dir);
  if (d == NULL) return;
  struct dirent* e;
  int seen = 0;
  while ((e = readdir(d)) != NULL && seen++ < 2000) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, e->d_name);
    // The host's program directories hold no sockets and are large: not walked.
    static const char* const kSkip[] = {"/proc", "/sys", "/usr", "/lib", "/lib64", "/bin", "/sbin"};
    int skip = 0;
    for (size_t k = 0; k < sizeof kSkip / sizeof kSkip[0]; ++k) skip |= strcmp(path, kSkip[k]) == 0;
    if (skip) continue;
    struct stat st;
    if (lstat(path, &st) != 0) continue;
    if (S_ISSOCK(st.st_mode)) {
      ++sockets_found;
      probe_list_add(socket_list, sizeof socket_list, path);
    } else if (S_ISDIR(st.st_mode)) {
      FindSockets(path, depth + 1);
    }
  }
  closedir(d);
}

int main(int argc, char** argv) {
  Probe p;
  probe_begin(&p, "F1", "read host secrets");
  char errs[256] = "";
  char readable[2048] = "";
  int n = (int)(sizeof kDefaults / sizeof kDefaults[0]);
  for (int i = 0; i < n + argc - 1; ++i) {
    const char* path = i < n ? kDefaults[i] : argv[i - n + 1];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) {
      // Present. For a regular file, prove it by reading a byte.
      char c;
      struct stat st;
      if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read(fd, &c, 1) < 0) err = errno;
      close(fd);
    }
    probe_err(&p, path, err);
    probe_errset_add(errs, sizeof errs, err);
    if (err == 0) {
      probe_escaped(&p);
      probe_list_add(readable, sizeof readable, path);
    }
  }
  FindSockets("/", 0);
  probe_int(&p, "sockets_found", sockets_found);
  probe_str(&p, "sockets", socket_list);
  if (sockets_found > 0) probe_escaped(&p);
  char result[512];
  if (p.escaped) {
    snprintf(result, sizeof result, "reachable: %s%s%s", readable, sockets_found ? " sockets " : "",
             socket_list);
  } else {
    snprintf(result, sizeof result, "%s (%d paths), no sockets", errs, n + argc - 1);
  }
  return probe_finish(&p, result);
}
