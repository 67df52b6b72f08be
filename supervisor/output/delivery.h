// Delivering a run's accepted output files to the caller's directory: all or nothing.
//
// Regression (a failed delivery reported as success): with a name that already existed in
// `--output DIR` (a symlink, correctly not followed), only the files before it were written, the
// verdict stayed ok and plain mode said nothing. Now every destination name is checked before any
// file is written; any failure while writing removes what this delivery wrote; and the supervisor
// gives a failed delivery its own verdict (delivery-failed, exit 121). The supervisor also rolls a
// delivery back when the run's end event cannot be recorded: nothing reaches the caller without
// its record.
//
// The destination is the caller's own directory, so every step is fd-relative, one component at a
// time, never following a symlink (O_NOFOLLOW on single components), and never overwriting
// (O_CREAT|O_EXCL). Rollback removes only what still looks like what it created: the same device,
// inode, size and modification time (an inode number alone can be reused by a file the caller
// made after deleting ours).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::output {

struct DeliveryItem {
  std::string relative_path;  // '/'-separated components, none empty, ".", ".." or with NUL
  std::string_view bytes;     // must outlive Delivery::Write
};

struct DeliveryOptions {
  mode_t file_mode = 0600;
  mode_t dir_mode = 0700;
  // Test seam: runs before item `index` is written; a non-ok status fails the write there.
  std::function<Status(size_t index)> before_write;
};

class Delivery {
 public:
  Delivery() = default;
  Delivery(Delivery&&) noexcept = default;
  Delivery& operator=(Delivery&&) noexcept = default;
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;

  // Checks every item's destination (the file's name is free; each directory on the way is
  // absent or a real directory), then writes them all. FailedPrecondition names the first
  // conflicting paths (nothing was written); any other error names the path that failed (what was
  // written before it has been removed again).
  static Result<Delivery> Write(int dest_dirfd, const std::vector<DeliveryItem>& items,
                                const DeliveryOptions& options = {});

  // Removes what Write created (files, then the directories it made, newest first). Idempotent.
  Status Rollback();

  size_t files() const { return files_.size(); }

 private:
  struct Created {
    std::vector<std::string> components;
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;            // files only
    struct timespec mtime {};  // files only
  };
  Status Remove(const Created& c, bool dir);

  UniqueFd dest_;
  std::vector<Created> files_;
  std::vector<Created> dirs_;  // in creation order
};

}  // namespace safex::output
