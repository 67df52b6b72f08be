// ImageCache: the read-only filesystem images (erofs) the guest sees instead of host paths.
//
// A plan's kBind sources become one image that mirrors the host layout: each source is resolved
// (realpath: /bin -> /usr/bin on merged-/usr hosts) and a source inside another source is covered
// by it, so the image holds every host file once at its real absolute path, and each mount's
// guest-side source is its realpath inside the image.
//
// Building an image of /usr is slow (minutes for several GiB), so images are cached in `dir`,
// keyed by SHA-256 of (format version, the resolved roots, a fingerprint of every entry under them:
// path, inode, size, mode, owner, mtime and ctime). The fingerprint walk is paid on every run (a
// few hundred ms for a large /usr) and makes a changed host file a cache miss, never a stale view.
// Builds run under a per-key flock (concurrent runs with the same binds build once) into a
// temporary name renamed into place, in a child with its own mount namespace that bind-mounts the
// roots (non-recursively: host sub-mounts are not included) onto a staging skeleton and execs
// mkfs.erofs. The caller gets an O_RDONLY fd, so evicting an image in use is harmless.
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

struct RootfsImage {
  UniqueFd fd;                           // O_RDONLY
  std::string path;                      // where it is cached (for diagnostics)
  std::vector<std::string> image_paths;  // per requested source: absolute path inside the image
  std::vector<bool> is_file;             // per requested source
  bool built = false;                    // a cache miss: built by this call
  std::chrono::nanoseconds fingerprint_time{0};
  std::chrono::nanoseconds build_time{0};
};

class ImageCache {
 public:
  struct Options {
    std::string dir;  // created 0700 if missing
    std::string mkfs_erofs = "/usr/bin/mkfs.erofs";
    size_t max_images = 4;  // least recently used images beyond this are removed
    std::chrono::seconds build_timeout{std::chrono::minutes(30)};
  };
  explicit ImageCache(Options o) : o_(std::move(o)) {}

  // `sources`: absolute host paths (directories or regular files). NotFound / InvalidArgument for
  // a missing source or one of another type.
  Result<RootfsImage> Get(const std::vector<std::string>& sources);

  // Builds an uncached image of directory `src` at `out` (for the input mount).
  Status BuildDirectoryImage(const std::string& src, const std::string& out);

 private:
  Options o_;
};

// Removes a directory tree created by this process (no symlinks followed, no mount crossed).
Status RemoveTree(const std::string& path);

}  // namespace safex::microvm
