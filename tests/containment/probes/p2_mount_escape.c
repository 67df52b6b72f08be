// P2: mount, pivot_root, chroot, and the new mount API. Contained: each fails (EPERM / ENOSYS),
// or, where the sandbox allows one, it is confined to the sandbox (the runner checks the host).
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "probe.h"

#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif

int main(void) {
  Probe p;
  probe_begin(&p, "P2", "mount, pivot_root, chroot escape");
  char errs[256] = "";
  mkdir("/tmp/safex-p2", 0700);
  struct {
    const char* name;
    long rc;
    int err;
  } calls[6];
  int n = 0;
#define TRY(label, expr)                \
  do {                                  \
    errno = 0;                          \
    long rc_ = (long)(expr);            \
    calls[n].name = label;              \
    calls[n].rc = rc_;                  \
    calls[n].err = rc_ < 0 ? errno : 0; \
    ++n;                                \
  } while (0)
  TRY("mount_tmpfs", mount("tmpfs", "/tmp/safex-p2", "tmpfs", 0, "size=1m"));
  TRY("mount_bind_root", mount("/", "/tmp/safex-p2", NULL, MS_BIND | MS_REC, NULL));
  TRY("umount_proc", umount2("/proc", MNT_DETACH));
  TRY("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp/safex-p2"));
  TRY("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
  TRY("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */));
  for (int i = 0; i < n; ++i) {
    probe_err(&p, calls[i].name, calls[i].err);
    probe_errset_add(errs, sizeof errs, calls[i].err);
    if (calls[i].rc >= 0) probe_escaped(&p);
  }
  // chroot last: if it worked, "/.." climbs (the classic escape) and the probe looks around.
  int rc = chroot("/tmp");
  int chroot_err = rc == 0 ? 0 : errno;
  probe_err(&p, "chroot", chroot_err);
  probe_errset_add(errs, sizeof errs, chroot_err);
  if (rc == 0) probe_escaped(&p);
  return probe_finish(&p, errs);
}
