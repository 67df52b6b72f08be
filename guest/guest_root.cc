#include "guest/guest_root.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/small_file.h"
#include "guest/util.h"

namespace safex::guest {
namespace {

using microvm::GuestMount;
using microvm::GuestMountKind;

std::string MountError(const std::string& what, const std::string& target) {
  return ErrnoMessage(what + " at " + target);
}

// Targets come from a verified plan, but the agent checks the shape it relies on anyway.
bool SafeAbsolutePath(const std::string& p) {
  if (p.empty() || p[0] != '/' || p.size() > 4000) return false;
  size_t start = 1;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    std::string_view part(p.data() + start, end - start);
    if (part == "." || part == ".." || (part.empty() && end != p.size())) return false;
    start = end + 1;
  }
  return p.find('\0') == std::string::npos;
}

unsigned long FlagsOf(const GuestMount& m) {
  unsigned long f = 0;
  if (m.nosuid) f |= MS_NOSUID;
  if (m.nodev) f |= MS_NODEV;
  if (m.noexec) f |= MS_NOEXEC;
  return f;
}

// Read-only bind of `src` at `target`: bind, then remount the new mount with the flags (a bind
// mount ignores flags given with MS_BIND).
std::string BindReadOnly(const std::string& src, const std::string& target, unsigned long flags) {
  if (mount(src.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return MountError("bind " + src, target);
  }
  if (mount(nullptr, target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, nullptr) !=
      0) {
    return MountError("remount read-only", target);
  }
  return "";
}

std::string MountTmpfs(const std::string& target, uint64_t size, const char* mode,
                       unsigned long flags) {
  std::string data = "size=" + std::to_string(size) + ",mode=" + mode;
  if (mount("tmpfs", target.c_str(), "tmpfs", flags, data.c_str()) != 0) {
    return MountError("mount tmpfs (" + data + ")", target);
  }
  return "";
}

std::string MakeMountPoint(const std::string& path, bool is_file) {
  if (!is_file) {
    if (int e = MakeDirs(path)) return "mkdir " + path + ": " + std::strerror(e);
    return "";
  }
  std::string parent = path.substr(0, path.rfind('/'));
  if (!parent.empty()) {
    if (int e = MakeDirs(parent)) return "mkdir " + parent + ": " + std::strerror(e);
  }
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoMessage("create mount point " + path);
  close(fd);
  return "";
}

std::string BuildDev(const std::string& dev, uint64_t shm_size) {
  if (std::string e = MountTmpfs(dev, 64 * 1024, "0755", MS_NOSUID | MS_NOEXEC); !e.empty()) {
    return e;
  }
  struct Node {
    const char* name;
    unsigned major, minor;
  };
  for (const Node& n : {Node{"null", 1, 3}, Node{"zero", 1, 5}, Node{"full", 1, 7},
                        Node{"random", 1, 8}, Node{"urandom", 1, 9}}) {
    std::string p = dev + "/" + n.name;
    // Security: only these memory-like character devices exist in the workload's /dev.
    if (mknod(p.c_str(), S_IFCHR | 0666, makedev(n.major, n.minor)) != 0 ||
        chmod(p.c_str(), 0666) != 0) {
      return ErrnoMessage("mknod " + p);
    }
  }
  struct Link {
    const char* name;
    const char* target;
  };
  for (const Link& l : {Link{"fd", "/proc/self/fd"}, Link{"stdin", "/proc/self/fd/0"},
                        Link{"stdout", "/proc/self/fd/1"}, Link{"stderr", "/proc/self/fd/2"}}) {
    std::string p = dev + "/" + l.name;
    if (symlink(l.target, p.c_str()) != 0) return ErrnoMessage("symlink " + p);
  }
  std::string shm = dev + "/shm";
  if (mkdir(shm.c_str(), 0755) != 0) return ErrnoMessage("mkdir " + shm);
  if (std::string e = MountTmpfs(shm, shm_size, "1777", MS_NOSUID | MS_NODEV | MS_NOEXEC);
      !e.empty()) {
    return e;
  }
  if (mount(nullptr, dev.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
            nullptr) != 0) {
    return MountError("remount read-only", dev);
  }
  return "";
}

}  // namespace

std::string MountEarly() {
  struct M {
    const char* src;
    const char* dir;
    const char* type;
    unsigned long flags;
  };
  for (const M& m : {M{"devtmpfs", "/dev", "devtmpfs", MS_NOSUID},
                     M{"proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC},
                     M{"sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC}}) {
    mkdir(m.dir, 0755);
    if (mount(m.src, m.dir, m.type, m.flags, nullptr) != 0 && errno != EBUSY) {
      return MountError("mount " + std::string(m.type), m.dir);
    }
  }
  return "";
}

std::string SwitchAgentRoot() {
  const std::string root = "/agent";
  if (mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoMessage("mkdir /agent");
  if (mount("tmpfs", root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) {
    return MountError("mount tmpfs", root);
  }
  for (const char* d : {"/dev", "/proc", "/sys"}) {
    std::string to = root + d;
    if (mkdir(to.c_str(), 0755) != 0) return ErrnoMessage("mkdir " + to);
    if (mount(d, to.c_str(), nullptr, MS_MOVE, nullptr) != 0)
      return MountError("move " + std::string(d), to);
  }
  for (const char* d : {"/wl", "/ro", "/in"}) {
    std::string p = root + d;
    if (mkdir(p.c_str(), 0755) != 0) return ErrnoMessage("mkdir " + p);
  }
  // The switch_root sequence: the tmpfs becomes "/" of the namespace, on top of rootfs.
  if (chdir(root.c_str()) != 0) return ErrnoMessage("chdir /agent");
  if (mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) return ErrnoMessage("move /agent to /");
  if (chroot(".") != 0) return ErrnoMessage("chroot");
  if (chdir("/") != 0) return ErrnoMessage("chdir /");
  return "";
}

std::string FindDiskBySerial(const std::string& serial, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (DIR* d = opendir("/sys/block")) {
      std::string found;
      while (dirent* e = readdir(d)) {
        if (std::strncmp(e->d_name, "vd", 2) != 0) continue;
        const std::optional<std::string> s =
            ReadSmallFile(std::string("/sys/block/") + e->d_name + "/serial");
        if (s && TrimNewline(*s) == serial) {
          found = std::string("/dev/") + e->d_name;
          break;
        }
      }
      closedir(d);
      if (!found.empty() && access(found.c_str(), F_OK) == 0) return found;
    }
    if (std::chrono::steady_clock::now() > deadline) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string BuildWorkloadRoot(const microvm::GuestSpec& spec, std::chrono::milliseconds disk_wait) {
  const std::string wl = kWorkloadRoot;
  if (mount("tmpfs", wl.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") != 0) {
    return MountError("mount tmpfs", wl);
  }
  bool need_disk[microvm::kMaxRootfsDisks] = {};
  bool need_input = false;
  for (const GuestMount& m : spec.mounts) {
    if (!SafeAbsolutePath(m.target) || m.target == "/") return "bad mount target: " + m.target;
    if (m.kind == GuestMountKind::kBind) {
      if (!SafeAbsolutePath(m.image_path) || m.disk >= microvm::kMaxRootfsDisks) {
        return "bad image path for " + m.target;
      }
      need_disk[m.disk] = true;
    }
    if (m.kind == GuestMountKind::kInput && !m.image_path.empty()) need_input = true;
  }
  // Each rootfs disk at /ro/<n>, the input disk at /in: erofs, read-only (QEMU opened them
  // read-only too).
  auto mount_disk = [&](const std::string& serial, const std::string& dir) -> std::string {
    std::string dev = FindDiskBySerial(serial, disk_wait);
    if (dev.empty()) return "disk " + serial + " not found";
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoMessage("mkdir " + dir);
    if (mount(dev.c_str(), dir.c_str(), "erofs", MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
      return MountError("mount erofs " + dev, dir);
    }
    return "";
  };
  for (uint32_t i = 0; i < microvm::kMaxRootfsDisks; ++i) {
    if (!need_disk[i]) continue;
    std::string e = mount_disk(microvm::kRootfsDiskSerialPrefix + std::to_string(i),
                               "/ro/" + std::to_string(i));
    if (!e.empty()) return e;
  }
  if (need_input) {
    if (std::string e = mount_disk(microvm::kInputDiskSerial, "/in"); !e.empty()) return e;
  }

  for (const char* d : {"/proc", "/dev", "/sys", "/etc"}) {
    std::string p = wl + d;
    if (mkdir(p.c_str(), 0755) != 0) return ErrnoMessage("mkdir " + p);
  }
  for (const auto& [name, content] : spec.etc_files) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
      return "bad /etc file name: " + name;
    }
    if (int e = CreateFile(wl + "/etc/" + name, content, 0644)) {
      return "create /etc/" + name + ": " + std::strerror(e);
    }
  }

  for (const GuestMount& m : spec.mounts) {
    const std::string t = wl + m.target;
    bool file_point = m.kind == GuestMountKind::kBind && m.is_file;
    if (std::string e = MakeMountPoint(t, file_point); !e.empty()) return e;
    unsigned long flags = FlagsOf(m);
    std::string err;
    switch (m.kind) {
      case GuestMountKind::kBind:
        err = BindReadOnly("/ro/" + std::to_string(m.disk) + m.image_path, t, flags);
        break;
      case GuestMountKind::kInput:
        if (m.image_path.empty()) {
          // No input directory was given: an empty, read-only directory, as under gVisor.
          err = MountTmpfs(t, 4096, "0755", flags);
          if (err.empty() && mount(nullptr, t.c_str(), nullptr,
                                   MS_BIND | MS_REMOUNT | MS_RDONLY | flags, nullptr) != 0) {
            err = MountError("remount read-only", t);
          }
        } else {
          err = BindReadOnly("/in", t, flags);
        }
        break;
      case GuestMountKind::kTmpfs:
      case GuestMountKind::kOutput:
        if (m.size_bytes == 0) return "writable mount without a size: " + m.target;
        err = MountTmpfs(t, m.size_bytes, "1777", flags);
        break;
    }
    if (!err.empty()) return err;
  }

  if (std::string e = BuildDev(wl + "/dev", spec.disk_bytes > 0 ? spec.disk_bytes : 65536);
      !e.empty()) {
    return e;
  }
  if (mount("sysfs", (wl + "/sys").c_str(), "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
            nullptr) != 0) {
    return MountError("mount sysfs", wl + "/sys");
  }
  if (mount(nullptr, wl.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
            nullptr) != 0) {
    return MountError("remount read-only", wl);
  }
  return "";
}

}  // namespace safex::guest
