#include "guest/output_sender.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <string>
#include <vector>

#include "guest/guest_root.h"

namespace safex::guest {
namespace {

using microvm::FileHeader;
using microvm::FileKind;
using microvm::FrameType;

constexpr int kMaxDepth = 32;
constexpr size_t kMaxPath = 4000;

struct Walker {
  const microvm::GuestSpec& spec;
  Channel& channel;
  uint32_t mount_index = 0;
  uint64_t entries_left;
  uint64_t bytes_left;
  uint64_t skipped = 0;
  bool ok = true;

  bool SendHeader(const FileHeader& h) {
    ok = ok && channel.Send(FrameType::kFileBegin, microvm::EncodeFileHeader(h));
    return ok;
  }

  void SendRegular(int dirfd, const std::string& name, FileHeader h) {
    int fd = openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      ++skipped;
      return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      ++skipped;
      return;
    }
    h.size = static_cast<uint64_t>(st.st_size);
    if (!SendHeader(h)) {
      close(fd);
      return;
    }
    uint64_t want = std::min<uint64_t>(h.size, bytes_left);
    char buf[microvm::kMaxDataFrame];
    while (want > 0 && ok) {
      ssize_t n = read(fd, buf, static_cast<size_t>(std::min<uint64_t>(want, sizeof buf)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      ok = channel.Send(FrameType::kFileData, std::string_view(buf, static_cast<size_t>(n)));
      want -= static_cast<uint64_t>(n);
      bytes_left -= static_cast<uint64_t>(n);
    }
    close(fd);
    if (ok) ok = channel.Send(FrameType::kFileEnd, "");
  }

  void Walk(int dirfd, const std::string& rel, int depth) {
    int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0) return;
    DIR* d = fdopendir(dup_fd);
    if (d == nullptr) {
      close(dup_fd);
      return;
    }
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
    }
    closedir(d);
    std::sort(names.begin(), names.end());  // a deterministic order for the host
    for (const std::string& name : names) {
      if (!ok) return;
      std::string path = rel.empty() ? name : rel + "/" + name;
      struct stat st;
      if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || path.size() > kMaxPath ||
          entries_left == 0) {
        ++skipped;
        continue;
      }
      FileHeader h;
      h.mount_index = mount_index;
      h.mode = st.st_mode & 07777;
      h.path = path;
      if (S_ISDIR(st.st_mode)) {
        if (depth >= kMaxDepth) {
          ++skipped;
          continue;
        }
        int sub = openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
          ++skipped;
          continue;
        }
        --entries_left;
        h.kind = FileKind::kDirectory;
        if (SendHeader(h)) Walk(sub, path, depth + 1);
        close(sub);
      } else if (S_ISREG(st.st_mode)) {
        --entries_left;
        h.kind = FileKind::kRegular;
        SendRegular(dirfd, name, h);
      } else if (S_ISLNK(st.st_mode)) {
        char target[4097];
        ssize_t n = readlinkat(dirfd, name.c_str(), target, sizeof target - 1);
        if (n < 0) {
          ++skipped;
          continue;
        }
        --entries_left;
        h.kind = FileKind::kSymlink;
        h.link_target.assign(target, static_cast<size_t>(n));
        SendHeader(h);
      } else if (S_ISFIFO(st.st_mode)) {
        --entries_left;
        h.kind = FileKind::kFifo;
        SendHeader(h);
      } else {
        ++skipped;  // sockets and device nodes are not output
      }
    }
  }
};

}  // namespace

bool SendOutputs(const microvm::GuestSpec& spec, Channel& channel, uint64_t* skipped) {
  Walker w{spec, channel};
  w.entries_left = spec.max_output_files > 0 ? spec.max_output_files + 1 : 100000;
  w.bytes_left =
      spec.max_output_bytes > 0 ? spec.max_output_bytes : std::numeric_limits<uint64_t>::max();
  for (size_t i = 0; i < spec.mounts.size() && w.ok; ++i) {
    const microvm::GuestMount& m = spec.mounts[i];
    if (m.kind != microvm::GuestMountKind::kOutput) continue;
    std::string dir = std::string(kWorkloadRoot) + m.target;
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    w.mount_index = static_cast<uint32_t>(i);
    w.Walk(fd, "", 0);
    close(fd);
  }
  *skipped = w.skipped;
  return w.ok;
}

}  // namespace safex::guest
