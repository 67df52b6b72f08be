// Collecting output files from an output mount, after the run, without trusting anything in it.
//
// The mount's directory was writable by the sandboxed code, so every name in it is hostile: a
// symlink to a host file, a FIFO that blocks a reader, a device node, a 10 GiB sparse file, a
// hardlink to a host file, or a path swapped for a symlink while we look. The rules:
// - Only names that a `validate file` path or glob matches are opened (and directories that such
//   a glob could reach below). Everything else is left alone, unopened.
// - Every open is fd-relative, one component at a time, never following a symlink:
//   openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) with
//   O_NOFOLLOW, or (kernels without openat2) openat(O_NOFOLLOW) on a single component plus an
//   st_dev check against the mount root.
// - A matched name is classified with fstatat(AT_SYMLINK_NOFOLLOW) before anything is opened;
//   only regular files are opened (O_NONBLOCK|O_NOCTTY), and fstat on the opened fd must show the
//   same inode, a regular file, and st_nlink == 1. Refused, each with its reason: symlink (also a
//   symlink where a declared path needs a directory), FIFO, device, socket, other non-regular,
//   hardlink (st_nlink > 1: another name for it may live anywhere, on the host if the output is
//   not its own filesystem), changed between listing and opening, on another filesystem.
// - Sizes come from fstat BEFORE reading: a file larger than its validator's max with
//   overflow = reject is refused unread; with overflow = truncate only the first max bytes are
//   read. The count of collected files and their total bytes are capped (plan.outputs), across
//   every output mount of the run. Reading stops at the planned size; a file that grew or shrank
//   meanwhile is refused.
// - The walk itself is bounded (entries listed, depth).
// - A name (file, or directory on the way to one) that a `validate file` path or glob matches is
//   refused unopened when it holds a control character (C0 including newline and tab, DEL, C1),
//   invalid UTF-8, a bidirectional control (U+202A..U+202E, U+2066..U+2069, U+200E, U+200F,
//   U+061C) or another invisible formatting character (zero-width characters, U+2028/9, the
//   BOM...): the report can only show such a name escaped, so it would no longer name the file
//   delivered to the caller's directory, and a terminal or file manager may show it as something
//   else. A refused directory is not entered. Names no validator matches are left alone.
// REQUIRES for all of it: every process of the run is gone (nothing can race us for real; the
// checks above still hold if something could).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "plan/plan.h"
#include "supervisor/output/stream_validator.h"

namespace safex::output {

enum class RefusalReason {
  kSymlink,
  kFifo,
  kDevice,
  kSocket,
  kNotRegular,  // a directory named by a literal path, or another type
  kHardlink,
  kTooBig,       // larger than its validator's max (overflow = reject)
  kTooMany,      // more than outputs.max_files
  kTotalTooBig,  // would exceed outputs.max_total
  kChanged,      // changed between listing, opening and reading
  kOtherFilesystem,
  kWalkLimit,  // the directory tree has more entries or depth than the walk allows
  kBadName,    // "unsafe-name": a name the report could only show escaped (see above)
  kOpenFailed,
  kReadFailed,
};
const char* RefusalReasonName(RefusalReason r);

// Why `component` (one path component) may not be collected: "a newline", "invalid UTF-8", "a
// bidirectional control (U+202E)"...; "" when it may.
std::string UnsafeNameProblem(std::string_view component);

struct Refusal {
  std::string path;  // inside the sandbox (escaped)
  RefusalReason reason = RefusalReason::kOpenFailed;
  std::string detail;              // escaped
  std::vector<size_t> validators;  // the file validators that named it (may be empty)
};

struct CollectedFile {
  std::string sandbox_path;        // raw bytes of the name: escape before logging
  std::string relative_path;       // relative to the mount root (raw)
  std::vector<size_t> validators;  // the file validators that match it, in plan order
  uint64_t size = 0;               // st_size when collected
  bool truncated = false;          // only a prefix was read (overflow = truncate)
  std::string bytes;               // what was read
  std::string sha256;              // of bytes
};

struct CollectOptions {
  uint64_t max_walk_entries = 100000;  // directory entries listed, over the whole mount
  uint32_t max_walk_depth = 32;        // directories below the mount root
  // Test seams. force_fallback walks without openat2 (as on kernels before 5.6) so that path is
  // tested; before_open runs between classifying a name and opening it (race simulation).
  bool force_fallback = false;
  std::function<void(const std::string& relative_path)> before_open;
};

// What was collected from one mount.
struct MountCollection {
  std::string mount_target;
  std::vector<CollectedFile> files;
  std::vector<Refusal> refusals;
  std::vector<std::string> absent;  // literal declared paths that do not exist (raw)
  uint64_t entries_walked = 0;
  bool used_fallback = false;
};

// Running totals against plan.outputs, shared by the mounts of one run.
struct CollectBudget {
  uint64_t files = 0;
  uint64_t bytes = 0;
};

// Collects the files of one output mount. `mount_dirfd` is an O_DIRECTORY fd of the mount's root;
// it is not kept. Never fails as a whole: problems are refusals.
MountCollection CollectMount(int mount_dirfd, const plan::Mount& mount,
                             const ValidatorSet& validators, const plan::OutputCollection& caps,
                             CollectBudget* budget, const CollectOptions& options = {});

struct WriteOptions {
  mode_t file_mode = 0600;
  mode_t dir_mode = 0700;
  bool force_fallback = false;  // test seam: no openat2
};

// Writes `bytes` as `relative_path` below `dest_dirfd`, creating directories as needed. Never
// follows a symlink in the destination and never overwrites: every directory component is opened
// fd-relative without following symlinks, the file is created with O_CREAT|O_EXCL|O_NOFOLLOW.
Status WriteFileBeneath(int dest_dirfd, std::string_view relative_path, std::string_view bytes,
                        const WriteOptions& options = {});

}  // namespace safex::output
