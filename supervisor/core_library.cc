#include "supervisor/core_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>

namespace safex::cli {
namespace {

// Why this is enough: the checked descriptor is what gets loaded, so a file swapped after the
// check is not; and only a trusted owner can write the file or rename anything in its directory.
Status CheckTrusted(int fd, const std::string& what, bool directory, const CoreOwners& owners) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::Errno("fstat", what, errno);
  if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    return Status::PermissionDenied(what + ": not a " + (directory ? "directory" : "regular file"));
  }
  if (st.st_uid != 0 && st.st_uid != owners.euid && st.st_uid != owners.executable_owner) {
    return Status::PermissionDenied(what + ": owned by uid " + std::to_string(st.st_uid) +
                                    ", neither root, the caller nor the executable's owner");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::PermissionDenied(what + ": writable by its group or by others (chmod go-w)");
  }
  return Status::Ok();
}

std::string ExecutablePath() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

uid_t ExecutableOwner() {
  struct stat st {};
  return stat("/proc/self/exe", &st) == 0 ? st.st_uid : 0;
}

}  // namespace

std::vector<std::string> CoreLibraryDirs() {
  std::vector<std::string> dirs;
  const std::string exe = ExecutablePath();
  const size_t slash = exe.rfind('/');
  if (slash != std::string::npos) dirs.push_back(slash == 0 ? "/" : exe.substr(0, slash));
  dirs.push_back(kInstalledCoreDir);
  return dirs;
}

Result<UniqueFd> OpenCoreLibrary(const std::vector<std::string>& dirs, const CoreOwners& owners) {
  for (const std::string& dir : dirs) {
    UniqueFd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir_fd) continue;
    const std::string path = (dir == "/" ? "" : dir) + "/" + kCoreLibraryName;
    UniqueFd fd(openat(dir_fd.get(), kCoreLibraryName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
    if (!fd && errno == ENOENT) continue;
    if (!fd) return Status::Errno("open", path, errno);  // ELOOP: a symlink
    SAFEX_RETURN_IF_ERROR(CheckTrusted(dir_fd.get(), dir, /*directory=*/true, owners));
    SAFEX_RETURN_IF_ERROR(CheckTrusted(fd.get(), path, /*directory=*/false, owners));
    return fd;
  }
  std::string where;
  for (const std::string& dir : dirs) where += (where.empty() ? "" : ", ") + dir;
  return Status::NotFound(std::string(kCoreLibraryName) + " is in none of: " + where +
                          " (install it with packaging/install.sh, or keep it beside the executable)");
}

int RunCore(int argc, char** argv, const char* build_id) {
  Result<UniqueFd> fd = OpenCoreLibrary(CoreLibraryDirs(), {geteuid(), ExecutableOwner()});
  if (!fd.ok()) {
    std::fprintf(stderr, "safex: cannot use its core library: %s\n",
                 fd.status().ToString().c_str());
    return 125;
  }
  // Loaded by descriptor: the loader opens /proc/self/fd/N, the very file checked above.
  const std::string by_fd = "/proc/self/fd/" + std::to_string(fd->get());
  void* core = dlopen(by_fd.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (core == nullptr) {
    std::fprintf(stderr, "safex: cannot load its core library: %s\n", dlerror());
    return 125;
  }
  fd->Reset();
  auto entry = reinterpret_cast<CoreEntry>(dlsym(core, kCoreEntryName));
  if (entry == nullptr) {
    std::fprintf(stderr, "safex: its core library has no %s (a core of another version)\n",
                 kCoreEntryName);
    return 125;
  }
  return entry(argc, argv, build_id);
}

}  // namespace safex::cli
