// Host-side storage of one run: its private directory and the tmpfs mounts made inside it.
// Both are move-only owners that remove what they created when destroyed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/fs_tree.h"
#include "common/status.h"

namespace safex::drivers {

// A directory created fresh (mkdir 0700; an existing one is refused, never reused) and removed
// with everything below it on destruction.
class PrivateDir {
 public:
  PrivateDir() = default;
  ~PrivateDir();
  PrivateDir(PrivateDir&& o) noexcept;
  PrivateDir& operator=(PrivateDir&& o) noexcept;
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;

  // Creates `parent` (0700, with missing ancestors) if needed, then parent/name.
  static Result<PrivateDir> Create(const std::string& parent, const std::string& name);

  const std::string& path() const { return path_; }
  Status Remove();

 private:
  std::string path_;
};

// A fresh tmpfs mounted on the host at an existing empty directory, unmounted on destruction.
class TmpfsMount {
 public:
  struct Options {
    uint64_t size_bytes = 0;  // required
    uint64_t max_inodes = 0;  // 0: derived from the size (one inode per 4 KiB, at least 256)
    uid_t uid = 0;            // owner of the root directory
    gid_t gid = 0;
    mode_t mode = 0700;
    bool nosuid = true;
    bool nodev = true;
    bool noexec = true;
  };

  TmpfsMount() = default;
  ~TmpfsMount();
  TmpfsMount(TmpfsMount&& o) noexcept;
  TmpfsMount& operator=(TmpfsMount&& o) noexcept;
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  static Result<TmpfsMount> Mount(const std::string& path, const Options& options);

  const std::string& path() const { return path_; }
  bool mounted() const { return !path_.empty(); }
  // An O_DIRECTORY fd of the mount's root (caller closes).
  Result<int> OpenRoot() const;
  // True if less than one block is free (a write in the sandbox may have hit ENOSPC).
  bool Full() const;
  Status Unmount();

 private:
  std::string path_;
};

}  // namespace safex::drivers
