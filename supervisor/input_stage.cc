#include "supervisor/input_stage.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "common/fs_tree.h"
#include "common/unique_fd.h"

namespace safex::supervisor {
namespace {

struct Copier {
  const InputLimits& limits;
  uint64_t bytes = 0;
  uint64_t files = 0;

  Status CopyFile(int src_dir, int dst_dir, const std::string& name, const std::string& shown,
                  const struct stat& st) {
    if (bytes + static_cast<uint64_t>(st.st_size) > limits.max_bytes) {
      return Status::InvalidArgument("input is larger than the policy's disk limit (" +
                                     std::to_string(limits.max_bytes) + " bytes) at " + shown);
    }
    if (limits.before_open) limits.before_open(shown);
    // Security: O_NONBLOCK, so that a file swapped for a FIFO between listing and opening cannot
    // block root in open(2) (the fstat below then refuses it); no effect on a regular file.
    UniqueFd in(
        openat(src_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (!in) return Status::Errno("open input file", shown, errno);
    struct stat now {};
    // The file may have been swapped between listing and opening: check what we opened.
    if (fstat(in.get(), &now) != 0 || !S_ISREG(now.st_mode)) {
      return Status::InvalidArgument("input " + shown + " changed while it was copied");
    }
    UniqueFd out(
        openat(dst_dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444));
    if (!out) return Status::Errno("create staged file", shown, errno);
    uint64_t left = limits.max_bytes - bytes;
    uint64_t copied = 0;
    for (;;) {
      ssize_t n = sendfile(out.get(), in.get(), nullptr, 1 << 20);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::Errno("copy input file", shown, errno);
      }
      if (n == 0) break;
      copied += static_cast<uint64_t>(n);
      if (copied > left) {  // the file grew while we copied it
        return Status::InvalidArgument("input is larger than the policy's disk limit at " + shown);
      }
    }
    bytes += copied;
    return Status::Ok();
  }

  Status CopyDir(int src_dir, int dst_dir, const std::string& shown, uint32_t depth) {
    if (depth > limits.max_depth) {
      return Status::InvalidArgument("input is nested deeper than " +
                                     std::to_string(limits.max_depth) + " at " + shown);
    }
    int dup_fd = dup(src_dir);
    if (dup_fd < 0) return Status::Errno("dup", errno);
    DIR* d = fdopendir(dup_fd);
    if (d == nullptr) {
      close(dup_fd);
      return Status::Errno("fdopendir", shown, errno);
    }
    std::unique_ptr<DIR, int (*)(DIR*)> owner(d, closedir);
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      std::string child = shown + "/" + name;
      if (++files > limits.max_files) {
        return Status::InvalidArgument("input has more than " + std::to_string(limits.max_files) +
                                       " entries");
      }
      struct stat st {};
      if (fstatat(src_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return Status::Errno("stat input", child, errno);
      }
      if (S_ISREG(st.st_mode)) {
        SAFEX_RETURN_IF_ERROR(CopyFile(src_dir, dst_dir, name, child, st));
      } else if (S_ISDIR(st.st_mode)) {
        UniqueFd sub(
            openat(src_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub) return Status::Errno("open input dir", child, errno);
        if (mkdirat(dst_dir, name.c_str(), 0700) != 0) {
          return Status::Errno("mkdir staged dir", child, errno);
        }
        UniqueFd dsub(
            openat(dst_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!dsub) return Status::Errno("open staged dir", child, errno);
        SAFEX_RETURN_IF_ERROR(CopyDir(sub.get(), dsub.get(), child, depth + 1));
        if (fchmod(dsub.get(), 0555) != 0) return Status::Errno("chmod staged dir", child, errno);
      } else {
        const char* kind = S_ISLNK(st.st_mode)    ? "a symbolic link"
                           : S_ISFIFO(st.st_mode) ? "a FIFO"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : "a device";
        return Status::InvalidArgument("input " + child + " is " + kind +
                                       "; only regular files and directories are accepted");
      }
    }
    return Status::Ok();
  }
};

}  // namespace

Result<StagedInput> StagedInput::Create(const std::string& source, const std::string& dest,
                                        const InputLimits& limits) {
  UniqueFd src(open(source.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!src) return Status::Errno("open input directory", source, errno);
  if (mkdir(dest.c_str(), 0700) != 0) return Status::Errno("mkdir", dest, errno);
  StagedInput staged;
  staged.path_ = dest;  // from here on the destructor removes it
  UniqueFd dst(open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dst) return Status::Errno("open", dest, errno);
  Copier copier{limits};
  SAFEX_RETURN_IF_ERROR(copier.CopyDir(src.get(), dst.get(), "", 0));
  // Read-only for everyone: the sandbox user is not root and owns nothing here.
  if (fchmod(dst.get(), 0555) != 0) return Status::Errno("chmod", dest, errno);
  staged.bytes_ = copier.bytes;
  staged.files_ = copier.files;
  return staged;
}

StagedInput::StagedInput(StagedInput&& o) noexcept
    : path_(std::exchange(o.path_, std::string())), bytes_(o.bytes_), files_(o.files_) {}

StagedInput& StagedInput::operator=(StagedInput&& o) noexcept {
  if (this != &o) {
    if (!path_.empty()) RemoveTree(path_).ok();  // best effort: a leftover is swept by run id
    path_ = std::exchange(o.path_, std::string());
    bytes_ = o.bytes_;
    files_ = o.files_;
  }
  return *this;
}

StagedInput::~StagedInput() {
  if (!path_.empty()) RemoveTree(path_).ok();
}

}  // namespace safex::supervisor
