// The caller's input directory is not bound into the sandbox as it is: it is copied into a fresh,
// per-run, read-only snapshot that the sandbox user can read. That gives the run a consistent view
// (the caller cannot change its input mid-run), makes a 0700 directory of the caller's usable by the
// non-root sandbox user, and keeps anything but plain files and directories out (symlinks, devices,
// FIFOs and sockets are refused, hard links are copied as separate files).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace safex::supervisor {

struct InputLimits {
  uint64_t max_bytes = 0;   // total size of regular files (the plan's disk limit)
  uint64_t max_files = 10000;
  uint32_t max_depth = 32;
  // Test seam: runs between classifying a file and opening it (race simulation).
  std::function<void(const std::string& shown_path)> before_open;
};

class StagedInput {
 public:
  // Copies `source` (a directory) to a new directory `dest` (which must not exist). Fails with
  // InvalidArgument naming the offending path for anything but directories and regular files, or
  // when a limit is exceeded; nothing is left behind on failure.
  static Result<StagedInput> Create(const std::string& source, const std::string& dest,
                                    const InputLimits& limits);

  StagedInput(StagedInput&& o) noexcept;
  StagedInput& operator=(StagedInput&& o) noexcept;
  StagedInput(const StagedInput&) = delete;
  StagedInput& operator=(const StagedInput&) = delete;
  ~StagedInput();  // removes the snapshot

  const std::string& path() const { return path_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t files() const { return files_; }

 private:
  StagedInput() = default;
  std::string path_;
  uint64_t bytes_ = 0;
  uint64_t files_ = 0;
};

}  // namespace safex::supervisor
