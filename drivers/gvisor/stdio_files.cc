#include "drivers/gvisor/stdio_files.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace safex::drivers::gvisor {
namespace {

constexpr const char* kNames[2] = {"stdout", "stderr"};

// Page rounding of two files and tmpfs's own accounting: a program that writes exactly the cap
// never meets ENOSPC, and one that writes more is seen writing more than the cap.
constexpr uint64_t kSlackBytes = 64 << 10;

// Closing an inotify instance waits in the kernel for an SRCU grace period (fsnotify_destroy_group
// flushes the mark reaper): 7-19 ms in 7 of 10 `safex run`s measured here (docs/benchmarks.md, "The
// inotify instance's close"), on every run's path between the program's end and its end event.
// Nothing waits for that close, so it happens on a thread of its own; the watches are removed
// first (that only queues the reaper), so the unmount that follows finds none of ours. Without a
// thread to be had, the fd is closed here (the lambda's destructor).
void CloseInBackground(UniqueFd notify, const int (&watches)[2]) {
  if (!notify) return;
  for (int wd : watches) {
    if (wd >= 0) inotify_rm_watch(notify.get(), wd);
  }
  try {
    std::thread([fd = std::move(notify)]() mutable { fd.Reset(); }).detach();
  } catch (const std::system_error&) {
  }
}

}  // namespace

StdioFiles::~StdioFiles() { Close().ok(); }

Result<StdioFiles> StdioFiles::Create(const std::string& dir, uint64_t cap) {
  StdioFiles s;
  TmpfsMount::Options o;
  o.size_bytes = cap + kSlackBytes;
  o.max_inodes = 16;
  o.mode = 0700;  // root's: the program reaches its files only through the fds it is given
  s.buf_.resize(64 << 10);
  SAFEX_ASSIGN_OR_RETURN(s.mount_, TmpfsMount::Mount(dir, o));
  s.notify_.Reset(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!s.notify_) return Status::Errno("inotify_init1", errno);
  for (int i = 0; i < 2; ++i) {
    const std::string path = dir + "/" + kNames[i];
    // Security: a fresh tmpfs of ours; O_EXCL|O_NOFOLLOW anyway.
    s.reader_[i].Reset(
        open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!s.reader_[i]) return Status::Errno("create", path, errno);
    s.child_[i].Reset(open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC));
    if (!s.child_[i]) return Status::Errno("open", path, errno);
    s.watch_[i] = inotify_add_watch(s.notify_.get(), path.c_str(), IN_MODIFY);
    if (s.watch_[i] < 0) return Status::Errno("inotify_add_watch", path, errno);
  }
  return s;
}

void StdioFiles::CloseChildEnds() {
  child_[0].Reset();
  child_[1].Reset();
}

bool StdioFiles::Read(const std::function<void(int, std::string_view)>& sink) {
  if (notify_) {
    // Drain the notifications; the files themselves say what is new.
    char events[4096];
    while (read(notify_.get(), events, sizeof events) > 0) {
    }
  }
  bool any = false;
  std::vector<char>& buf = buf_;
  for (int i = 0; i < 2; ++i) {
    if (!reader_[i]) continue;
    struct stat st {};
    if (fstat(reader_[i].get(), &st) != 0) continue;
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    // The program truncated its own stream: what was read stays read; go on from the new end.
    if (size < offset_[i]) offset_[i] = size;
    while (offset_[i] < size) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(size - offset_[i], buf.size()));
      ssize_t n = pread(reader_[i].get(), buf.data(), want, static_cast<off_t>(offset_[i]));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      offset_[i] += static_cast<uint64_t>(n);
      any = true;
      sink(i, std::string_view(buf.data(), static_cast<size_t>(n)));
    }
  }
  return any;
}

Status StdioFiles::Release() {
  for (int i = 0; i < 2; ++i) {
    if (!reader_[i] || offset_[i] == 0) continue;
    // The reader is read-only; punching a hole needs a writable fd of the same file.
    UniqueFd w(
        open(("/proc/self/fd/" + std::to_string(reader_[i].get())).c_str(), O_WRONLY | O_CLOEXEC));
    if (!w) return Status::Errno("reopen", kNames[i], errno);
    if (fallocate(w.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                  static_cast<off_t>(offset_[i])) != 0) {
      return Status::Errno("fallocate", kNames[i], errno);
    }
  }
  return Status::Ok();
}

Status StdioFiles::Close() {
  CloseChildEnds();
  reader_[0].Reset();
  reader_[1].Reset();
  CloseInBackground(std::move(notify_), watch_);
  return mount_.Unmount();
}

}  // namespace safex::drivers::gvisor
