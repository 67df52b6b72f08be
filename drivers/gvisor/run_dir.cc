#include "drivers/gvisor/run_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>
#include <vector>

#include "common/unique_fd.h"

namespace safex::drivers::gvisor {
namespace {

// Empties the directory open as `dir_fd` (on device `dev`), depth first.
Status EmptyDir(int dir_fd, dev_t dev, const std::string& shown, int depth) {
  if (depth > 64) return Status::FailedPrecondition("remove: tree too deep at " + shown);
  int dup_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return Status::Errno("dup", shown, errno);
  DIR* d = fdopendir(dup_fd);
  if (d == nullptr) {
    int err = errno;
    close(dup_fd);
    return Status::Errno("fdopendir", shown, err);
  }
  std::vector<std::pair<std::string, bool>> entries;  // name, is_dir
  Status st;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat s;
    if (fstatat(dir_fd, name.c_str(), &s, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      st = Status::Errno("fstatat", shown + "/" + name, errno);
      break;
    }
    if (S_ISDIR(s.st_mode) && s.st_dev != dev) {
      st = Status::FailedPrecondition("remove: " + shown + "/" + name +
                                      " is still a mount point; not descending into it");
      break;
    }
    entries.emplace_back(name, S_ISDIR(s.st_mode));
  }
  closedir(d);
  SAFEX_RETURN_IF_ERROR(st);
  for (const auto& [name, is_dir] : entries) {
    std::string child = shown + "/" + name;
    if (is_dir) {
      UniqueFd sub(openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return Status::Errno("openat", child, errno);
      SAFEX_RETURN_IF_ERROR(EmptyDir(sub.get(), dev, child, depth + 1));
      if (unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return Status::Errno("rmdir", child, errno);
      }
    } else if (unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return Status::Errno("unlink", child, errno);
    }
  }
  return Status::Ok();
}

}  // namespace

Status RemoveTree(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return Status::Ok();
    return Status::Errno("open", path, errno);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Status::Errno("fstat", path, errno);
  SAFEX_RETURN_IF_ERROR(EmptyDir(fd.get(), st.st_dev, path, 0));
  fd.Reset();
  if (rmdir(path.c_str()) != 0 && errno != ENOENT) return Status::Errno("rmdir", path, errno);
  return Status::Ok();
}

PrivateDir::~PrivateDir() { Remove().ok(); }

PrivateDir::PrivateDir(PrivateDir&& o) noexcept : path_(std::exchange(o.path_, {})) {}

PrivateDir& PrivateDir::operator=(PrivateDir&& o) noexcept {
  if (this != &o) {
    Remove().ok();
    path_ = std::exchange(o.path_, {});
  }
  return *this;
}

Result<PrivateDir> PrivateDir::Create(const std::string& parent, const std::string& name) {
  if (parent.empty() || parent[0] != '/') {
    return Status::InvalidArgument("private dir parent must be absolute: " + parent);
  }
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return Status::InvalidArgument("bad private dir name: " + name);
  }
  // Create missing ancestors of the parent (0700: only the supervisor reads run directories).
  std::string cur;
  size_t pos = 1;
  while (pos <= parent.size()) {
    size_t end = parent.find('/', pos);
    if (end == std::string::npos) end = parent.size();
    cur = parent.substr(0, end);
    if (mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) return Status::Errno("mkdir", cur, errno);
    pos = end + 1;
  }
  struct stat st;
  if (lstat(parent.c_str(), &st) != 0) return Status::Errno("lstat", parent, errno);
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(parent + " is not a directory");
  std::string path = parent + "/" + name;
  if (mkdir(path.c_str(), 0700) != 0) {
    if (errno == EEXIST) {
      return Status::FailedPrecondition(path + " already exists (run id reused, or left over)");
    }
    return Status::Errno("mkdir", path, errno);
  }
  PrivateDir d;
  d.path_ = path;
  return d;
}

Status PrivateDir::Remove() {
  if (path_.empty()) return Status::Ok();
  Status st = RemoveTree(path_);
  if (st.ok()) path_.clear();
  return st;
}

TmpfsMount::~TmpfsMount() { Unmount().ok(); }

TmpfsMount::TmpfsMount(TmpfsMount&& o) noexcept : path_(std::exchange(o.path_, {})) {}

TmpfsMount& TmpfsMount::operator=(TmpfsMount&& o) noexcept {
  if (this != &o) {
    Unmount().ok();
    path_ = std::exchange(o.path_, {});
  }
  return *this;
}

Result<TmpfsMount> TmpfsMount::Mount(const std::string& path, const Options& o) {
  if (o.size_bytes == 0) return Status::InvalidArgument("tmpfs needs a size: " + path);
  uint64_t inodes = o.max_inodes != 0 ? o.max_inodes : std::max<uint64_t>(256, o.size_bytes / 4096);
  char mode[16];
  snprintf(mode, sizeof mode, "%o", static_cast<unsigned>(o.mode & 07777));
  std::string data = "size=" + std::to_string(o.size_bytes) + ",nr_inodes=" +
                     std::to_string(inodes) + ",mode=" + mode + ",uid=" + std::to_string(o.uid) +
                     ",gid=" + std::to_string(o.gid);
  unsigned long flags = 0;
  if (o.nosuid) flags |= MS_NOSUID;
  if (o.nodev) flags |= MS_NODEV;
  if (o.noexec) flags |= MS_NOEXEC;
  // Security: a fresh tmpfs on a directory inside the run's private (0700) directory; it is
  // size-capped so a run cannot fill the host's memory through it, and unmounted at teardown.
  if (mount("tmpfs", path.c_str(), "tmpfs", flags, data.c_str()) != 0) {
    return Status::Errno("mount tmpfs", path, errno);
  }
  TmpfsMount m;
  m.path_ = path;
  return m;
}

Result<int> TmpfsMount::OpenRoot() const {
  int fd = open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::Errno("open", path_, errno);
  return fd;
}

bool TmpfsMount::Full() const {
  struct statfs s;
  if (path_.empty() || statfs(path_.c_str(), &s) != 0) return false;
  return s.f_bavail == 0 || s.f_ffree == 0;
}

Status TmpfsMount::Unmount() {
  if (path_.empty()) return Status::Ok();
  if (umount2(path_.c_str(), UMOUNT_NOFOLLOW) != 0) {
    int err = errno;
    if (err == EINVAL || err == ENOENT) {  // not mounted (any more)
      path_.clear();
      return Status::Ok();
    }
    // Something still holds it: detach now so nothing new can reach it; freed when released.
    if (umount2(path_.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
      return Status::Errno("umount2", path_, errno);
    }
  }
  path_.clear();
  return Status::Ok();
}

}  // namespace safex::drivers::gvisor
