#include "drivers/microvm/rootfs_image.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <random>
#include <utility>

#include "common/fs_tree.h"
#include "common/sha256.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "drivers/microvm/guest_spec.h"

namespace safex::microvm {
namespace {

using Clock = std::chrono::steady_clock;

// Bump when the image layout or the mkfs options change: old images are then never used.
constexpr const char* kImageFormat = "safex-rootfs-erofs-v2";  // v2: one image per root

bool IsUnder(const std::string& path, const std::string& root) {
  return root == "/" || path == root ||
         (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
          path[root.size()] == '/');
}

struct Fingerprinter {
  Sha256Hasher h;

  void Add(const std::string& path, const struct stat& st) {
    h.Update(path);
    uint64_t fields[] = {
        static_cast<uint64_t>(st.st_ino),          static_cast<uint64_t>(st.st_size),
        static_cast<uint64_t>(st.st_mode),         static_cast<uint64_t>(st.st_uid),
        static_cast<uint64_t>(st.st_gid),          static_cast<uint64_t>(st.st_mtim.tv_sec),
        static_cast<uint64_t>(st.st_mtim.tv_nsec), static_cast<uint64_t>(st.st_ctim.tv_sec),
        static_cast<uint64_t>(st.st_ctim.tv_nsec)};
    h.Update(std::string_view("\0", 1));
    h.Update(std::string_view(reinterpret_cast<const char*>(fields), sizeof fields));
  }

  Status Walk(int dirfd, const std::string& path, dev_t dev, int depth) {
    if (depth > 256) return Status::InvalidArgument("directory tree too deep: " + path);
    int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0) return Status::Errno("fcntl", path, errno);
    DIR* d = fdopendir(dup_fd);
    if (d == nullptr) {
      close(dup_fd);
      return Status::Errno("fdopendir", path, errno);
    }
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        names.emplace_back(e->d_name);
      }
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      struct stat st;
      std::string child = path + "/" + name;
      if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // vanished while walking
        return Status::Errno("fstatat", child, errno);
      }
      Add(child, st);
      // A mount point's contents are not in the image (the bind is not recursive).
      if (S_ISDIR(st.st_mode) && st.st_dev == dev) {
        int sub = openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
          if (errno == EACCES) continue;
          return Status::Errno("openat", child, errno);
        }
        Status s = Walk(sub, child, dev, depth + 1);
        close(sub);
        SAFEX_RETURN_IF_ERROR(s);
      }
    }
    return Status::Ok();
  }
};

// The last KiB of the builder's stderr, with anything unprintable blanked (it goes into a message).
std::string StderrTail(int fd) {
  char buf[1024];
  const off_t size = lseek(fd, 0, SEEK_END);
  const off_t from = std::max<off_t>(0, size - static_cast<off_t>(sizeof buf));
  const ssize_t got = pread(fd, buf, sizeof buf, from);
  if (got <= 0) return "";
  std::string tail(buf, static_cast<size_t>(got));
  for (char& c : tail) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = ' ';
  }
  return tail;
}

// Runs `argv` (argv[0] absolute) with stdin/stdout on /dev/null and stderr captured, optionally in
// a private mount namespace where each binds[i].first is bind-mounted on binds[i].second first
// (common/subprocess.h). Returns the error text (with the tail of stderr) or "" on exit status 0.
std::string RunBuilder(const std::vector<std::string>& args,
                       const std::vector<std::pair<std::string, std::string>>& binds,
                       std::chrono::seconds timeout) {
  UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
  UniqueFd err_fd(memfd_create("mkfs-stderr", MFD_CLOEXEC));
  if (!null_fd.valid() || !err_fd.valid()) return std::string("setup: ") + std::strerror(errno);
  SpawnOptions o;
  o.argv = args;
  o.fds = {{0, null_fd.get()}, {1, null_fd.get()}, {2, err_fd.get()}};
  o.bind_mounts = binds;
  Result<Subprocess> child = Subprocess::Spawn(o);
  if (!child.ok()) return child.status().message();
  std::string result;
  Result<std::optional<ExitStatus>> ended = child->Wait(Clock::now() + timeout);
  if (!ended.ok()) {
    child->KillAndWait();
    result = ended.status().message();
  } else if (!ended->has_value()) {
    child->KillAndWait();
    result = "timed out after " + std::to_string(timeout.count()) + " s";
  } else if (const ExitStatus& e = **ended; !(e.exited && e.code == 0)) {
    result = e.exited ? "exit status " + std::to_string(e.code)
                      : "killed by signal " + std::to_string(e.signal);
  }
  if (!result.empty()) {
    const std::string tail = StderrTail(err_fd.get());
    if (!tail.empty()) result += ": " + tail;
  }
  return result;
}

Status MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string p = path.substr(0, i);
      if (mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) return Status::Errno("mkdir", p, errno);
    }
  }
  return Status::Ok();
}

std::string RandomSuffix() {
  std::random_device rd;
  return std::to_string(getpid()) + "." + std::to_string(rd());
}

// Removes least recently used images (mtime is the LRU clock) beyond `keep` images or `max_bytes`
// in total, never one in `in_use`.
void Evict(const std::string& dir, size_t keep, uint64_t max_bytes,
           const std::vector<std::string>& in_use) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  struct Image {
    int64_t mtime;
    uint64_t bytes;
    std::string name;
  };
  std::vector<Image> images;
  uint64_t total = 0;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() < 7 || n.compare(n.size() - 6, 6, ".erofs") != 0) continue;
    struct stat st;
    if (fstatat(dirfd(d), n.c_str(), &st, 0) != 0) continue;
    images.push_back(
        {static_cast<int64_t>(st.st_mtim.tv_sec), static_cast<uint64_t>(st.st_size), n});
    total += static_cast<uint64_t>(st.st_size);
  }
  closedir(d);
  std::sort(images.begin(), images.end(),
            [](const Image& a, const Image& b) { return a.mtime < b.mtime; });
  size_t count = images.size();
  for (const Image& img : images) {
    if (count <= keep && total <= max_bytes) break;
    std::string path = dir + "/" + img.name;
    if (std::find(in_use.begin(), in_use.end(), path) != in_use.end()) continue;
    std::string base = img.name.substr(0, img.name.size() - 6);
    if (unlink(path.c_str()) == 0) {
      unlink((dir + "/" + base + ".lock").c_str());
      --count;
      total -= img.bytes;
    }
  }
}

}  // namespace

Result<RootfsImages> ImageCache::Get(const std::vector<std::string>& sources) {
  RootfsImages out;
  std::vector<std::pair<std::string, bool>> candidates;  // realpath, is_file
  for (const std::string& s : sources) {
    if (s.empty() || s[0] != '/') return Status::InvalidArgument("bind source not absolute: " + s);
    char buf[PATH_MAX];
    if (realpath(s.c_str(), buf) == nullptr) return Status::Errno("realpath", s, errno);
    struct stat st;
    if (stat(buf, &st) != 0) return Status::Errno("stat", buf, errno);
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
      return Status::InvalidArgument("bind source is neither a directory nor a file: " + s);
    }
    if (std::string(buf) == "/") {
      return Status::InvalidArgument("the host root cannot be an image source");
    }
    out.image_paths.push_back(buf);
    out.is_file.push_back(S_ISREG(st.st_mode));
    candidates.emplace_back(buf, S_ISREG(st.st_mode));
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<std::pair<std::string, bool>> roots;
  for (const auto& c : candidates) {
    bool covered = false;
    for (const auto& r : roots) covered = covered || IsUnder(c.first, r.first);
    if (!covered) roots.push_back(c);
  }
  if (roots.size() > kMaxRootfsDisks) {
    return Status::Unavailable("microvm: the plan binds " + std::to_string(roots.size()) +
                               " separate host trees; at most " + std::to_string(kMaxRootfsDisks) +
                               " are supported");
  }
  if (mkdir(o_.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Errno("mkdir", o_.dir, errno);
  }
  std::vector<std::string> in_use;
  for (const auto& [root, is_file] : roots) {
    SAFEX_ASSIGN_OR_RETURN(RootfsImages::Disk disk,
                           GetOne(root, is_file, &out.fingerprint_time, &out.build_time));
    in_use.push_back(disk.path);
    out.disks.push_back(std::move(disk));
  }
  for (const std::string& p : out.image_paths) {
    uint32_t idx = 0;
    while (idx < roots.size() && !IsUnder(p, roots[idx].first)) ++idx;
    out.disk_of.push_back(idx);
  }
  Evict(o_.dir, o_.max_images, o_.max_total_bytes, in_use);
  return out;
}

Result<RootfsImages::Disk> ImageCache::GetOne(const std::string& root, bool is_file,
                                              std::chrono::nanoseconds* fingerprint_time,
                                              std::chrono::nanoseconds* build_time) {
  auto t0 = Clock::now();
  Fingerprinter fp;
  fp.h.Update(kImageFormat);
  struct stat st;
  if (lstat(root.c_str(), &st) != 0) return Status::Errno("lstat", root, errno);
  fp.Add(root, st);
  if (!is_file) {
    UniqueFd fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return Status::Errno("open", root, errno);
    SAFEX_RETURN_IF_ERROR(fp.Walk(fd.get(), root, st.st_dev, 0));
  }
  std::string key = fp.h.FinishHex();
  *fingerprint_time += Clock::now() - t0;

  RootfsImages::Disk disk;
  disk.root = root;
  disk.path = o_.dir + "/" + key + ".erofs";
  std::string lock_path = o_.dir + "/" + key + ".lock";
  UniqueFd lock(open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock) return Status::Errno("open", lock_path, errno);
  while (flock(lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return Status::Errno("flock", lock_path, errno);
  }
  UniqueFd fd(open(disk.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    auto b0 = Clock::now();
    std::string suffix = RandomSuffix();
    std::string stage = o_.dir + "/stage." + suffix;
    std::string tmp = o_.dir + "/" + key + ".tmp." + suffix;
    if (mkdir(stage.c_str(), 0755) != 0) return Status::Errno("mkdir", stage, errno);
    // The skeleton: the root's parents as plain directories, the root itself as a mount point.
    std::string point = stage + root;
    Status s = Status::Ok();
    if (is_file) {
      s = MakeDirs(point.substr(0, point.rfind('/')));
      if (s.ok()) {
        int f = open(point.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (f < 0) {
          s = Status::Errno("create", point, errno);
        } else {
          close(f);
        }
      }
    } else {
      s = MakeDirs(point);
    }
    std::string err;
    if (s.ok()) {
      err = RunBuilder({o_.mkfs_erofs, "--quiet", "--preserve-mtime", tmp, stage}, {{root, point}},
                       o_.build_timeout);
    }
    Status cleanup = RemoveTree(stage);
    if (!s.ok() || !err.empty()) {
      unlink(tmp.c_str());
      if (!s.ok()) return s.With("preparing the rootfs image of " + root);
      return Status::Unavailable("microvm: building the image of " + root + " failed: " + err);
    }
    if (!cleanup.ok()) {
      unlink(tmp.c_str());
      return cleanup.With("removing the image staging directory");
    }
    if (chmod(tmp.c_str(), 0600) != 0 || rename(tmp.c_str(), disk.path.c_str()) != 0) {
      unlink(tmp.c_str());
      return Status::Errno("rename", disk.path, errno);
    }
    disk.built = true;
    *build_time += Clock::now() - b0;
    fd.Reset(open(disk.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return Status::Errno("open", disk.path, errno);
  }
  // Recently used images are kept: mtime is the LRU clock.
  utimensat(AT_FDCWD, disk.path.c_str(), nullptr, 0);
  disk.fd = std::move(fd);
  return disk;
}

Status ImageCache::BuildDirectoryImage(const std::string& src, const std::string& out) {
  struct stat st;
  if (stat(src.c_str(), &st) != 0) return Status::Errno("stat", src, errno);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument("input is not a directory: " + src);
  std::string err =
      RunBuilder({o_.mkfs_erofs, "--quiet", "--preserve-mtime", out, src}, {}, o_.build_timeout);
  if (!err.empty()) {
    unlink(out.c_str());
    return Status::Unavailable("microvm: building the input image failed: " + err);
  }
  return Status::Ok();
}

}  // namespace safex::microvm
