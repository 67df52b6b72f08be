#include "drivers/microvm/output_receiver.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

namespace safex::microvm {
namespace {

constexpr size_t kMaxComponents = 32;
constexpr size_t kMaxPathBytes = 4000;
constexpr size_t kMaxLinkTarget = 4095;
constexpr uint64_t kMetadataSlack = 1024 * 1024;

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

Status Violation(const std::string& what) {
  return Status::DataLoss("guest output stream: " + what);
}

// A detached, size-capped tmpfs: created with the new mount API and never attached anywhere.
Result<UniqueFd> DetachedTmpfs(uint64_t size_bytes, uint64_t nr_inodes) {
  UniqueFd fs(fsopen("tmpfs", FSOPEN_CLOEXEC));
  if (!fs) return Status::Errno("fsopen", "tmpfs", errno);
  std::string size = std::to_string(size_bytes);
  std::string inodes = std::to_string(nr_inodes);
  if (fsconfig(fs.get(), FSCONFIG_SET_STRING, "size", size.c_str(), 0) != 0 ||
      fsconfig(fs.get(), FSCONFIG_SET_STRING, "nr_inodes", inodes.c_str(), 0) != 0 ||
      fsconfig(fs.get(), FSCONFIG_SET_STRING, "mode", "0755", 0) != 0 ||
      fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
    return Status::Errno("fsconfig", "tmpfs", errno);
  }
  // Security: the mount is detached (in no namespace); it lives only as long as our fds.
  UniqueFd mnt(
      fsmount(fs.get(), FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC));
  if (!mnt) return Status::Errno("fsmount", "tmpfs", errno);
  UniqueFd dir(openat(mnt.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return Status::Errno("openat", "tmpfs root", errno);
  return dir;
}

}  // namespace

struct OutputReceiver::State {
  struct Root {
    uint32_t index;
    UniqueFd dir;
  };
  Caps caps;
  std::vector<Root> roots;
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t truncated = 0;
  // The regular file being received.
  UniqueFd file;
  uint64_t announced = 0;
  uint64_t written = 0;
  bool cut = false;
};

OutputReceiver::OutputReceiver(std::unique_ptr<State> s) : s_(std::move(s)) {}
OutputReceiver::OutputReceiver(OutputReceiver&&) noexcept = default;
OutputReceiver& OutputReceiver::operator=(OutputReceiver&&) noexcept = default;
OutputReceiver::~OutputReceiver() = default;

Result<OutputReceiver> OutputReceiver::Create(const std::vector<OutputMountSpec>& mounts,
                                              Caps caps) {
  auto s = std::make_unique<State>();
  s->caps = caps;
  for (const OutputMountSpec& m : mounts) {
    if (m.size_bytes == 0) return Status::InvalidArgument("output mount without a size");
    SAFEX_ASSIGN_OR_RETURN(UniqueFd dir,
                           DetachedTmpfs(m.size_bytes + kMetadataSlack, caps.max_entries + 16));
    s->roots.push_back({m.mount_index, std::move(dir)});
  }
  return OutputReceiver(std::move(s));
}

bool OutputReceiver::ValidPath(std::string_view path) {
  if (path.empty() || path.size() > kMaxPathBytes) return false;
  std::vector<std::string_view> parts = Split(path);
  if (parts.size() > kMaxComponents) return false;
  for (std::string_view p : parts) {
    if (p.empty() || p == "." || p == ".." || p.size() > 255) return false;
    if (p.find('\0') != std::string_view::npos) return false;
  }
  return true;
}

bool OutputReceiver::in_file() const { return s_->file.valid(); }

int OutputReceiver::RootFd(uint32_t mount_index) const {
  for (const auto& r : s_->roots) {
    if (r.index == mount_index) return r.dir.get();
  }
  return -1;
}

uint64_t OutputReceiver::entries() const { return s_->entries; }
uint64_t OutputReceiver::bytes_written() const { return s_->bytes; }
uint64_t OutputReceiver::truncated_files() const { return s_->truncated; }

Status OutputReceiver::Begin(const FileHeader& h) {
  State& s = *s_;
  if (s.file.valid()) return Violation("an entry began inside a file");
  int root = RootFd(h.mount_index);
  if (root < 0) return Violation("entry for a mount that is not an output mount");
  if (!ValidPath(h.path)) return Violation("invalid path");
  if (s.entries >= s.caps.max_entries) return Violation("more entries than the cap");
  std::vector<std::string_view> parts = Split(h.path);
  // Walk to the parent without following anything: only directories this stream created.
  UniqueFd parent;
  int cur = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    std::string comp(parts[i]);
    UniqueFd next(openat(cur, comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return Violation("parent of an entry is not a directory sent earlier");
    parent = std::move(next);
    cur = parent.get();
  }
  std::string name(parts.back());
  mode_t mode = h.mode & 0777;
  switch (h.kind) {
    case FileKind::kDirectory:
      if (mkdirat(cur, name.c_str(), mode) != 0) return Violation("cannot create directory");
      break;
    case FileKind::kRegular: {
      UniqueFd f(
          openat(cur, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
      if (!f) return Violation("cannot create file");
      s.file = std::move(f);
      s.announced = h.size;
      s.written = 0;
      s.cut = false;
      break;
    }
    case FileKind::kSymlink:
      if (h.link_target.empty() || h.link_target.size() > kMaxLinkTarget ||
          h.link_target.find('\0') != std::string::npos) {
        return Violation("invalid symlink target");
      }
      // Stored as text; nothing on the host follows it (collection is O_NOFOLLOW).
      if (symlinkat(h.link_target.c_str(), cur, name.c_str()) != 0) {
        return Violation("cannot create symlink");
      }
      break;
    case FileKind::kFifo:
      if (mknodat(cur, name.c_str(), S_IFIFO | mode, 0) != 0)
        return Violation("cannot create fifo");
      break;
  }
  ++s.entries;
  return Status::Ok();
}

Status OutputReceiver::Data(std::string_view bytes) {
  State& s = *s_;
  if (!s.file.valid()) return Violation("file data outside a file");
  if (bytes.size() > s.announced - s.written) return Violation("more data than the file's size");
  uint64_t room = bytes.size();
  if (s.caps.max_total_bytes > 0) {
    room = std::min<uint64_t>(room,
                              s.caps.max_total_bytes - std::min(s.bytes, s.caps.max_total_bytes));
  }
  size_t off = 0;
  while (!s.cut && off < room) {
    ssize_t n = write(s.file.get(), bytes.data() + off, room - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      s.cut = true;  // ENOSPC/EFBIG: the tmpfs cap; the rest is dropped
      break;
    }
    off += static_cast<size_t>(n);
    s.bytes += static_cast<uint64_t>(n);
  }
  if (room < bytes.size()) s.cut = true;
  s.written += bytes.size();
  return Status::Ok();
}

Status OutputReceiver::End() {
  State& s = *s_;
  if (!s.file.valid()) return Violation("end of a file that was not begun");
  struct stat st;
  bool short_file =
      fstat(s.file.get(), &st) != 0 || static_cast<uint64_t>(st.st_size) < s.announced;
  if (s.cut || short_file) {
    ++s.truncated;
    // Reproduce the real size (sparse: no host memory) so size checks see what the guest had.
    (void)!ftruncate(s.file.get(),
                     static_cast<off_t>(std::min(s.announced, s.caps.max_sparse_size)));
  }
  s.file.Reset();
  return Status::Ok();
}

}  // namespace safex::microvm
