// F9: device access: mknod a block device, open /dev/sda, /dev/kmsg, /dev/mem and friends, and
// list /dev. Contained: a minimal /dev (no block devices, none of the listed nodes), and mknod
// refused - or, where the sandbox's own filesystem lets mknod through, a node that cannot be
// opened. /dev/fuse is reported on its own ("fuse"): whether it opens says which kernel answers.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "probe.h"

static const char* const kNodes[] = {
    "/dev/sda",  "/dev/vda", "/dev/nvme0n1", "/dev/kmsg",  "/dev/mem",       "/dev/kmem",
    "/dev/port", "/dev/kvm", "/dev/loop0",   "/dev/vsock", "/dev/dri/card0", "/dev/vhost-net",
};

int main(int argc, char** argv) {
  // argv[1]: where to try mknod (a writable directory: scratch).
  const char* dir = argc > 1 ? argv[1] : "/tmp";
  Probe p;
  probe_begin(&p, "F9", "mknod and open raw devices");
  char errs[256] = "";
  char opened[1024] = "";
  for (size_t i = 0; i < sizeof kNodes / sizeof kNodes[0]; ++i) {
    int fd = open(kNodes[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    probe_err(&p, kNodes[i], err);
    probe_errset_add(errs, sizeof errs, err);
    if (err == 0) {
      probe_escaped(&p);
      probe_list_add(opened, sizeof opened, kNodes[i]);
    }
  }
  char node[4096];
  snprintf(node, sizeof node, "%s/safex-f9-sda", dir);
  int rc = mknod(node, S_IFBLK | 0600, makedev(8, 0));
  int mknod_err = rc == 0 ? 0 : errno;
  probe_err(&p, "mknod_block", mknod_err);
  if (rc == 0) {
    // A node exists; the escape is being able to use it.
    int fd = open(node, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    probe_err(&p, "mknod_node_open", fd < 0 ? errno : 0);
    if (fd >= 0) {
      probe_escaped(&p);
      close(fd);
    }
    unlink(node);
  }
  int fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  probe_err(&p, "fuse", fuse < 0 ? errno : 0);
  if (fuse >= 0) close(fuse);
  // What /dev holds, and whether any block device is among it.
  char entries[2048] = "";
  int block_devices = 0;
  DIR* d = opendir("/dev");
  if (d != NULL) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char path[600];
      snprintf(path, sizeof path, "/dev/%s", e->d_name);
      struct stat st;
      if (lstat(path, &st) == 0 && S_ISBLK(st.st_mode)) ++block_devices;
      probe_list_add(entries, sizeof entries, e->d_name);
    }
    closedir(d);
  }
  probe_str(&p, "dev_entries", entries);
  probe_int(&p, "block_devices", block_devices);
  char result[1400];
  if (p.escaped) {
    snprintf(result, sizeof result, "opened: %s; mknod %s", opened, probe_errname(mknod_err));
  } else {
    snprintf(result, sizeof result, "%s; mknod %s; /dev = %s", errs, probe_errname(mknod_err),
             entries);
  }
  return probe_finish(&p, result);
}
