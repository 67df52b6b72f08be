#include "drivers/run_dir.h"

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

namespace safex::drivers {

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
  std::string data = "size=" + std::to_string(o.size_bytes) +
                     ",nr_inodes=" + std::to_string(inodes) + ",mode=" + mode +
                     ",uid=" + std::to_string(o.uid) + ",gid=" + std::to_string(o.gid);
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

}  // namespace safex::drivers
