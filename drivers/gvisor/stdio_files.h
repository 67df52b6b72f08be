// The sandboxed program's stdout and stderr under gVisor: regular files on a size-capped host
// tmpfs, read as they grow, instead of host pipes.
//
// Why (regression: silent loss of output): gVisor imports a donated host pipe as a non-blocking
// host fd, and a non-blocking pipe write larger than the pipe's free space writes part and
// returns that count without error. The Sentry hands the short count (65,536) to the program,
// where Linux would have blocked until everything was written; programs that do not retry short
// writes (Python with -u, raw os.write) lost the rest while the run was reported ok. A bigger host
// pipe only moves the cliff. A write to a regular file is complete (or fails with ENOSPC), so the
// program sees what it would on Linux: every byte written.
//
// How the guarantees of a pipe are kept:
// - bounded: the tmpfs holds at most the plan's output cap (stdout + stderr together) plus a few
//   pages; a write beyond fails inside the sandbox (ENOSPC) and the supervisor has already seen
//   more than the cap: the output limit fires, as it did with pipes;
// - append only: the program's fds are opened O_APPEND (gVisor keeps the host flag), so seeking
//   cannot rewrite what was read; a program that truncates its own stdout only loses what the
//   supervisor had not read yet, and reading goes on from the new end;
// - streaming: an inotify watch (IN_MODIFY) wakes the supervisor's poll loop as bytes arrive;
//   Read() takes what is new.
// Everything lives below the run's private 0700 directory; the mount is removed by Close() or the
// destructor, after the reader fds are closed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "drivers/run_dir.h"

namespace safex::drivers::gvisor {

class StdioFiles {
 public:
  StdioFiles() = default;
  StdioFiles(StdioFiles&&) noexcept = default;
  StdioFiles& operator=(StdioFiles&&) noexcept = default;
  ~StdioFiles();

  // Mounts a tmpfs at `dir` (an existing empty directory) sized for `cap` bytes of output, and
  // creates the stdout and stderr files in it.
  static Result<StdioFiles> Create(const std::string& dir, uint64_t cap);

  // The program's ends (write-only, O_APPEND), for runsc's --pass-fd. Close them in the parent
  // once runsc has been started.
  int child_stdout() const { return child_[0].get(); }
  int child_stderr() const { return child_[1].get(); }
  void CloseChildEnds();

  // Readable (POLLIN) when either file was written to since the last Read().
  int notify_fd() const { return notify_.get(); }

  // Reads everything that is new in both files (at most the tmpfs's size: the cap and a few
  // pages), handing each chunk to `sink(which, bytes)` (0 stdout, 1 stderr). Returns false when
  // nothing was new.
  bool Read(const std::function<void(int which, std::string_view bytes)>& sink);

  // Frees the tmpfs space of everything read so far (a session's next command gets the whole
  // cap again): the read range becomes a hole, so the files' sizes and the program's append
  // position do not change, and a new Read() still starts where the last one stopped.
  Status Release();

  // Closes every fd (the inotify instance's on a thread of its own: its close waits for the
  // kernel), then unmounts. Idempotent.
  Status Close();

 private:
  TmpfsMount mount_;
  UniqueFd child_[2];
  UniqueFd reader_[2];
  uint64_t offset_[2] = {0, 0};
  UniqueFd notify_;
  int watch_[2] = {-1, -1};
  std::vector<char> buf_;  // one read buffer for the run
};

}  // namespace safex::drivers::gvisor
