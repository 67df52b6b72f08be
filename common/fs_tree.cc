#include "common/fs_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "common/unique_fd.h"

namespace safex {
namespace {

// Empties the directory open as `dir_fd` (on device `dev`), depth first.
Status EmptyDir(int dir_fd, dev_t dev, const std::string& shown, int depth) {
  if (depth > 64) return Status::FailedPrecondition("remove: tree too deep at " + shown);
  // A read-only directory (an input snapshot) cannot be emptied by a non-root owner: it is about
  // to go, so it is made writable for its owner first.
  struct stat self {};
  if (fstat(dir_fd, &self) == 0 && (self.st_mode & S_IWUSR) == 0) {
    fchmod(dir_fd, (self.st_mode & 07777) | S_IRWXU);
  }
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

Result<std::vector<std::string>> ListDirectory(const std::string& path) {
  UniqueFd dir(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    if (errno == ENOENT) return Status::NotFound(path + " does not exist");
    return Status::Errno("open", path, errno);
  }
  auto names = ListDirectoryAt(dir.get());
  if (!names.ok()) return names.status().With(path);
  return names;
}

Result<std::vector<std::string>> ListDirectoryAt(int dirfd) {
  // fdopendir takes the descriptor over: a duplicate of the caller's, which stays theirs.
  const int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return Status::Errno("fcntl", errno);
  DIR* d = fdopendir(dup_fd);
  if (d == nullptr) {
    close(dup_fd);
    return Status::Errno("fdopendir", errno);
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> ListDirectoryOrEmpty(const std::string& path) {
  auto names = ListDirectory(path);
  return names.ok() ? std::move(names).value() : std::vector<std::string>{};
}

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

}  // namespace safex
