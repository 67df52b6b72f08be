#include "supervisor/private_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.h"

namespace safex::supervisor {
namespace {

std::string Octal(mode_t m) {
  char buf[8];
  snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

}  // namespace

std::string PrivateRootFor(const std::string& state_root) { return state_root + "/private"; }

Status EnsurePrivateDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::Errno("mkdir", dir, errno);
  // Security: O_NOFOLLOW|O_DIRECTORY, then fstat of what was opened: a symlink planted under the
  // name is refused, and the checks are of the directory itself, not of whatever a path resolves
  // to later.
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return Status::Errno("open", dir, errno);
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Status::Errno("fstat", dir, errno);
  if (st.st_uid != geteuid()) {
    return Status::PermissionDenied("private directory " + dir + " is owned by uid " +
                                    std::to_string(st.st_uid) + ", not by uid " +
                                    std::to_string(geteuid()) + "; remove it");
  }
  if ((st.st_mode & 077) != 0) {
    return Status::PermissionDenied("private directory " + dir + " has mode " + Octal(st.st_mode) +
                                    "; other users could reach what is staged in it (it must be "
                                    "0700; remove it and it is made again)");
  }
  return Status::Ok();
}

Status CheckTrustedDir(const std::string& dir) {
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return Status::Errno("open", dir, errno);
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Status::Errno("fstat", dir, errno);
  if (st.st_uid != geteuid()) {
    return Status::PermissionDenied(dir + " is owned by uid " + std::to_string(st.st_uid) +
                                    ", not by uid " + std::to_string(geteuid()) +
                                    "; refusing to keep run state in it");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return Status::PermissionDenied(dir + " (mode " + Octal(st.st_mode) +
                                    ") is writable by other users; refusing to keep run state "
                                    "in it");
  }
  return Status::Ok();
}

}  // namespace safex::supervisor
