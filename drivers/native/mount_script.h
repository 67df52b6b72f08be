// The native sandbox's file system as a script: the ordered list of mount(2), mknod(2) and
// symlink(2) calls that turn the run's prepared root directory (drivers/rootfs.h) into the
// program's whole view of the file system. Computed here by a pure function in the parent (unit
// tests check it step by step), executed by the sandbox's first process in its own mount
// namespace before pivot_root (sandbox_child.h), so nothing here is ever visible to the host.
//
// The order, and why:
//   1. the mount tree made private: nothing below propagates back to the host's namespace;
//   2. the root directory bound onto itself, read-only (pivot_root needs a mount point, and
//      mounting onto directories of a read-only mount is allowed);
//   3. /proc of the run's own pid namespace, and /proc/sys over itself read-only;
//   4. /dev: a small tmpfs with only null, zero, full, random, urandom, the fd links, and
//      /dev/shm (a tmpfs of the plan's disk size);
//   5. the plan's mounts in plan order (binds read-only unless the plan says otherwise, input
//      read-only, output the host's size-capped tmpfs, each attached from a clone the parent
//      made of exactly what it checked; tmpfs fresh with its size and inode caps, owned by the
//      run's host id);
//   6. /dev made read-only once populated.
// Every mount is nosuid and nodev (but /dev, whose nodes are its point), and noexec where the plan
// says so.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace safex::drivers::native {

struct MountOp {
  enum class Kind {
    kMakePrivate,  // mount(NULL, "/", NULL, MS_REC|MS_PRIVATE)
    kBind,         // mount(source, target, MS_BIND), then remount the bind with `flags`
    kAttach,       // move_mount(source_fd) to target (a detached clone), then remount with `flags`
    kMount,        // mount(source, target, fstype, flags, data): tmpfs, proc
    kRemount,      // mount(NULL, target, MS_BIND|MS_REMOUNT|flags): a mount's own flags
    kMknod,        // mknod(target, S_IFCHR|mode, dev)
    kMkdir,        // mkdir(target, mode)
    kSymlink,      // symlink(source, target)
  };
  Kind kind = Kind::kMount;
  std::string source;
  int source_fd = -1;  // kAttach: a detached mount (open_tree(OPEN_TREE_CLONE)) of the parent's
  std::string target;  // a host path below the root directory (before pivot_root)
  std::string fstype;
  unsigned long flags = 0;
  std::string data;
  mode_t mode = 0;
  dev_t dev = 0;
  // For errors and tests: "bind /usr at /usr ro nosuid nodev".
  std::string what;
};

struct MountScriptInput {
  const plan::Plan* plan = nullptr;
  std::string root;  // the prepared root directory on the host (its mount points exist)
  // For each plan mount, in plan order: a detached clone (open_tree) of its host side, opened
  // and checked by the parent (a bind's source, the input snapshot or an empty directory, the
  // output tmpfs); -1 for a tmpfs made here. A mount made in the parent's namespace cannot be
  // bound by path from the sandbox's (EINVAL), and a clone is also immune to the path being
  // swapped after the check.
  std::vector<int> source_fds;
  uint32_t host_uid = 0;  // the run's host id: owner of the tmpfs mounts made here
  uint32_t host_gid = 0;
};

std::vector<MountOp> BuildMountScript(const MountScriptInput& in);

// The mounts the program sees besides the plan's, as drivers/sandbox_report.h compares them.
std::vector<std::string> InfrastructureMountLines();

}  // namespace safex::drivers::native
