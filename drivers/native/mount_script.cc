#include "drivers/native/mount_script.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>

#include "drivers/sandbox_report.h"

namespace safex::drivers::native {
namespace {

// One inode per 4 KiB of a tmpfs's size, at least 256: inode exhaustion ends at the cap too.
uint64_t InodesFor(uint64_t size) { return std::max<uint64_t>(256, size / 4096); }

std::string FlagWords(unsigned long flags) {
  std::string out = (flags & MS_RDONLY) != 0 ? "ro" : "rw";
  if ((flags & MS_NOSUID) != 0) out += " nosuid";
  if ((flags & MS_NODEV) != 0) out += " nodev";
  if ((flags & MS_NOEXEC) != 0) out += " noexec";
  return out;
}

unsigned long PlanFlags(const plan::Mount& m, bool read_only) {
  unsigned long f = 0;
  if (read_only) f |= MS_RDONLY;
  if (m.nosuid || !read_only) f |= MS_NOSUID;  // writable mounts are nosuid and nodev always
  if (m.nodev || !read_only) f |= MS_NODEV;
  if (m.noexec) f |= MS_NOEXEC;
  return f;
}

MountOp Bind(std::string source, std::string target, unsigned long flags, std::string shown) {
  MountOp op;
  op.kind = MountOp::Kind::kBind;
  op.source = std::move(source);
  op.target = std::move(target);
  op.flags = flags;
  op.what = "bind " + shown + " " + FlagWords(flags);
  return op;
}

MountOp Tmpfs(std::string target, unsigned long flags, std::string data, std::string shown) {
  MountOp op;
  op.kind = MountOp::Kind::kMount;
  op.source = "tmpfs";
  op.target = std::move(target);
  op.fstype = "tmpfs";
  op.flags = flags;
  op.data = std::move(data);
  op.what = "tmpfs at " + shown + " " + FlagWords(flags) + " (" + op.data + ")";
  return op;
}

std::string TmpfsData(uint64_t size, const char* mode, uint32_t uid, uint32_t gid) {
  return "size=" + std::to_string(size) + ",nr_inodes=" + std::to_string(InodesFor(size)) +
         ",mode=" + mode + ",uid=" + std::to_string(uid) + ",gid=" + std::to_string(gid);
}

void AddProc(const std::string& root, std::vector<MountOp>* out) {
  MountOp proc;
  proc.kind = MountOp::Kind::kMount;
  proc.source = "proc";
  proc.target = root + "/proc";
  proc.fstype = "proc";
  proc.flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  proc.what = "proc at /proc " + FlagWords(proc.flags) + " (the run's own pid namespace)";
  out->push_back(std::move(proc));
  // Kernel settings stay read-only whatever a process inside could gain.
  out->push_back(Bind(root + "/proc/sys", root + "/proc/sys",
                      MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "/proc/sys at /proc/sys"));
}

void AddDev(const MountScriptInput& in, std::vector<MountOp>* out) {
  const std::string dev = in.root + "/dev";
  out->push_back(Tmpfs(dev, MS_NOSUID | MS_NOEXEC, "size=65536,nr_inodes=64,mode=0755", "/dev"));
  struct Node {
    const char* name;
    unsigned minor;
  };
  for (const Node& n :
       {Node{"null", 3}, Node{"zero", 5}, Node{"full", 7}, Node{"random", 8}, Node{"urandom", 9}}) {
    MountOp op;
    op.kind = MountOp::Kind::kMknod;
    op.target = dev + "/" + n.name;
    op.mode = 0666;
    op.dev = makedev(1, n.minor);
    op.what = std::string("mknod /dev/") + n.name + " c 1 " + std::to_string(n.minor);
    out->push_back(std::move(op));
  }
  struct Link {
    const char* name;
    const char* to;
  };
  for (const Link& l : {Link{"fd", "/proc/self/fd"}, Link{"stdin", "/proc/self/fd/0"},
                        Link{"stdout", "/proc/self/fd/1"}, Link{"stderr", "/proc/self/fd/2"}}) {
    MountOp op;
    op.kind = MountOp::Kind::kSymlink;
    op.source = l.to;
    op.target = dev + "/" + l.name;
    op.what = std::string("symlink /dev/") + l.name + " -> " + l.to;
    out->push_back(std::move(op));
  }
  MountOp shm_dir;
  shm_dir.kind = MountOp::Kind::kMkdir;
  shm_dir.target = dev + "/shm";
  shm_dir.mode = 0755;
  shm_dir.what = "mkdir /dev/shm";
  out->push_back(std::move(shm_dir));
  out->push_back(Tmpfs(dev + "/shm", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                       TmpfsData(in.plan->limits.disk_bytes, "0700", in.host_uid, in.host_gid),
                       "/dev/shm"));
}

MountOp Attach(int fd, std::string target, unsigned long flags, std::string shown) {
  MountOp op;
  op.kind = MountOp::Kind::kAttach;
  op.source_fd = fd;
  op.target = std::move(target);
  op.flags = flags;
  op.what = "bind " + shown + " " + FlagWords(flags);
  return op;
}

MountOp PlanMount(const MountScriptInput& in, size_t i) {
  const plan::Mount& m = in.plan->mounts[i];
  const std::string target = in.root + m.target;
  const int fd = i < in.source_fds.size() ? in.source_fds[i] : -1;
  switch (m.kind) {
    case plan::MountKind::kBind:
      return Attach(fd, target, PlanFlags(m, m.read_only), m.source + " at " + m.target);
    case plan::MountKind::kInput:
      return Attach(fd, target, PlanFlags(m, true), "the input at " + m.target);
    case plan::MountKind::kOutput:
      return Attach(fd, target, PlanFlags(m, false), "the output tmpfs at " + m.target);
    case plan::MountKind::kTmpfs:
      break;
  }
  return Tmpfs(target, PlanFlags(m, false),
               TmpfsData(m.size_bytes, "0700", in.host_uid, in.host_gid), m.target);
}

}  // namespace

std::vector<MountOp> BuildMountScript(const MountScriptInput& in) {
  std::vector<MountOp> out;
  MountOp priv;
  priv.kind = MountOp::Kind::kMakePrivate;
  priv.target = "/";
  priv.what = "make every mount private";
  out.push_back(std::move(priv));
  out.push_back(Bind(in.root, in.root, MS_RDONLY | MS_NOSUID | MS_NODEV, "the run's root at /"));
  AddProc(in.root, &out);
  AddDev(in, &out);
  for (size_t i = 0; i < in.plan->mounts.size(); ++i) out.push_back(PlanMount(in, i));
  MountOp dev_ro;
  dev_ro.kind = MountOp::Kind::kRemount;
  dev_ro.target = in.root + "/dev";
  dev_ro.flags = MS_RDONLY | MS_NOSUID | MS_NOEXEC;
  dev_ro.what = "remount /dev " + FlagWords(dev_ro.flags);
  out.push_back(std::move(dev_ro));
  return out;
}

std::vector<std::string> InfrastructureMountLines() {
  return {MountLine("/", true, false), MountLine("/proc", false, true),
          MountLine("/proc/sys", true, true), MountLine("/dev", true, true),
          MountLine("/dev/shm", false, true)};
}

}  // namespace safex::drivers::native
