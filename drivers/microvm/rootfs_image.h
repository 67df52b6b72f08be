// ImageCache: the read-only filesystem images (erofs) the guest sees instead of host paths.
//
// A plan's kBind sources are resolved (realpath: /bin -> /usr/bin on merged-/usr hosts) and
// grouped into roots: a source inside another source is covered by it. Each root becomes its own
// image, which mirrors the host layout (the root at its real absolute path), attached as its own
// disk; each mount's guest-side source is (its root's disk, its realpath). One image per root, not
// per bind set, so that /usr is built once and shared by every plan that binds it, whatever else
// the plan binds (a test's probe directory, a tool's own directory).
//
// Building an image of /usr is slow (minutes for several GiB), so images are cached in `dir`,
// keyed by SHA-256 of (format version, the root, a fingerprint of every entry under it: path,
// inode, size, mode, owner, mtime and ctime). The fingerprint walk is paid on every run (about 2 s
// for an 8.7 GiB /usr on the build machine) and makes a changed host file a cache miss, never a
// stale view. Builds run under a per-key flock (concurrent runs build once) into a temporary name
// renamed into place, in a child with its own mount namespace that bind-mounts the root
// (non-recursively: host sub-mounts are not included) onto a staging skeleton and execs
// mkfs.erofs. The caller gets O_RDONLY fds, so evicting an image in use is harmless. Least
// recently used images beyond max_images or max_total_bytes are removed.
//
// The same machinery builds a run's input image from RunRequest::input_dir (never cached).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::microvm {

struct RootfsImages {
  struct Disk {
    UniqueFd fd;         // O_RDONLY
    std::string root;    // the host root it holds (at its own path inside the image)
    std::string path;    // where it is cached (for diagnostics)
    bool built = false;  // a cache miss: built by this call
  };
  std::vector<Disk> disks;               // one per root, at most kMaxRootfsDisks
  std::vector<uint32_t> disk_of;         // per requested source: index into disks
  std::vector<std::string> image_paths;  // per requested source: absolute path inside its image
  std::vector<bool> is_file;             // per requested source
  std::chrono::nanoseconds fingerprint_time{0};
  std::chrono::nanoseconds build_time{0};
};

class ImageCache {
 public:
  struct Options {
    std::string dir;  // created 0700 if missing
    std::string mkfs_erofs = "/usr/bin/mkfs.erofs";
    size_t max_images = 8;
    uint64_t max_total_bytes = 24ull << 30;
    std::chrono::seconds build_timeout{std::chrono::minutes(30)};
  };
  explicit ImageCache(Options o) : o_(std::move(o)) {}

  // `sources`: absolute host paths (directories or regular files). NotFound / InvalidArgument for
  // a missing source or one of another type; Unavailable for more roots than disks.
  Result<RootfsImages> Get(const std::vector<std::string>& sources);

  // Builds an uncached image of directory `src` at `out` (for the input mount).
  Status BuildDirectoryImage(const std::string& src, const std::string& out);

 private:
  Result<RootfsImages::Disk> GetOne(const std::string& root, bool is_file,
                                    std::chrono::nanoseconds* fingerprint_time,
                                    std::chrono::nanoseconds* build_time);
  Options o_;
};

}  // namespace safex::microvm
