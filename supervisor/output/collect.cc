#include "supervisor/output/collect.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

#include "common/sha256.h"
#include "common/unique_fd.h"
#include "supervisor/output/escape.h"
#include "supervisor/output/glob.h"
#include "supervisor/output/utf8.h"

namespace safex::output {
namespace {

// Set once openat2 reports ENOSYS (kernels before 5.6, or a seccomp filter that hides it).
std::atomic<bool> g_openat2_missing{false};

bool IsSingleComponent(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

// Opens one path component below `dirfd`, never following a symlink. Returns an fd, or -errno.
int OpenComponent(int dirfd, const std::string& name, int flags, bool force_fallback,
                  bool* used_fallback) {
  if (!IsSingleComponent(name)) return -EINVAL;
  flags |= O_NOFOLLOW | O_CLOEXEC;
  if (!force_fallback && !g_openat2_missing.load(std::memory_order_relaxed)) {
    struct open_how how;
    std::memset(&how, 0, sizeof how);
    how.flags = static_cast<uint64_t>(flags);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
    for (int attempt = 0; attempt < 16; ++attempt) {
      // Security: RESOLVE_BENEATH keeps resolution below dirfd; NO_SYMLINKS and NO_MAGICLINKS
      // refuse every symlink on the way (ELOOP); NO_XDEV refuses crossing into another mount.
      const long fd = syscall(SYS_openat2, dirfd, name.c_str(), &how, sizeof how);
      if (fd >= 0) return static_cast<int>(fd);
      if (errno == EAGAIN || errno == EINTR) continue;  // a concurrent rename: the kernel asks
      if (errno != ENOSYS) return -errno;
      g_openat2_missing.store(true, std::memory_order_relaxed);
      break;
    }
    if (!g_openat2_missing.load(std::memory_order_relaxed)) return -EAGAIN;
  }
  *used_fallback = true;
  // Security: `name` is a single component, so openat cannot leave dirfd; O_NOFOLLOW refuses a
  // symlink as that component (ELOOP). The caller checks st_dev for mount crossings.
  const int fd = openat(dirfd, name.c_str(), flags);
  return fd >= 0 ? fd : -errno;
}

std::string EscapeName(std::string_view bytes) { return EscapeForLog(bytes, {.max_output = 300}); }

std::string CodePoint(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", cp);
  return buf;
}

std::string JoinRel(const std::string& rel, const std::string& name) {
  return rel.empty() ? name : rel + "/" + name;
}

std::string Normalise(std::string_view path) {
  std::string out;
  for (std::string_view c : SplitPath(path)) {
    out += "/";
    out += c;
  }
  return out.empty() ? "/" : out;
}

struct PendingDir {
  std::shared_ptr<UniqueFd> parent;
  std::string name;
  std::string rel;
  uint32_t depth = 0;
  dev_t dev = 0;
  ino_t ino = 0;
};

class Walker {
 public:
  Walker(const plan::Mount& mount, const ValidatorSet& validators,
         const plan::OutputCollection& caps, CollectBudget* budget, const CollectOptions& options,
         MountCollection* out)
      : target_(Normalise(mount.target)),
        validators_(validators),
        caps_(caps),
        budget_(budget),
        options_(options),
        out_(out) {
    for (const std::string& p : validators.LiteralFilePaths()) literals_.insert(Normalise(p));
  }

  void Run(int mount_dirfd);

 private:
  std::string SandboxPath(const std::string& rel) const {
    return target_ == "/" ? "/" + rel : target_ + "/" + rel;
  }
  void Refuse(const std::string& rel, RefusalReason reason, std::string detail,
              std::vector<size_t> validators = {}) {
    Refusal r;
    r.path = EscapeName(SandboxPath(rel));
    r.reason = reason;
    r.detail = std::move(detail);
    r.validators = std::move(validators);
    out_->refusals.push_back(std::move(r));
    seen_.insert(rel);
  }
  void RefuseErrno(const std::string& rel, const char* what, int err,
                   std::vector<size_t> validators = {}) {
    RefusalReason reason = RefusalReason::kOpenFailed;
    std::string detail = std::string(what) + ": " + std::strerror(err);
    if (err == ELOOP) {
      reason = RefusalReason::kSymlink;
      detail = "became a symlink before it was opened (never followed)";
    } else if (err == EXDEV) {
      reason = RefusalReason::kOtherFilesystem;
      detail = "is on another filesystem (a mount point)";
    }
    Refuse(rel, reason, std::move(detail), std::move(validators));
  }
  // An open of a name we had classified failed: say what the name is now.
  void RefuseOpenFailure(int dirfd, const std::string& name, const std::string& rel, int err,
                         std::vector<size_t> validators = {}) {
    struct stat st;
    if ((err == ELOOP || err == ENOTDIR) &&
        fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISLNK(st.st_mode)) {
        Refuse(rel, RefusalReason::kSymlink,
               "became a symlink before it was opened (never followed)", std::move(validators));
      } else {
        Refuse(rel, RefusalReason::kChanged, "was replaced between listing and opening",
               std::move(validators));
      }
      return;
    }
    RefuseErrno(rel, "open", err, std::move(validators));
  }
  int Open(int dirfd, const std::string& name, int flags) {
    return OpenComponent(dirfd, name, flags, options_.force_fallback, &out_->used_fallback);
  }
  void ProcessDir(const std::shared_ptr<UniqueFd>& dir, const std::string& rel, uint32_t depth,
                  std::vector<PendingDir>* stack);
  void HandleEntry(const std::shared_ptr<UniqueFd>& dir, const std::string& name,
                   const std::string& rel, uint32_t depth, std::vector<PendingDir>* subdirs);
  void CollectRegular(int dirfd, const std::string& name, const std::string& rel,
                      const struct stat& listed, std::vector<size_t> validators);

  const std::string target_;
  const ValidatorSet& validators_;
  const plan::OutputCollection& caps_;
  CollectBudget* budget_;
  const CollectOptions& options_;
  MountCollection* out_;
  std::set<std::string> literals_;
  std::set<std::string> seen_;  // relative paths collected or refused
  dev_t root_dev_ = 0;
  bool stopped_ = false;
};

void Walker::Run(int mount_dirfd) {
  auto root = std::make_shared<UniqueFd>(fcntl(mount_dirfd, F_DUPFD_CLOEXEC, 3));
  struct stat st;
  if (!root->valid() || fstat(root->get(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    Refuse("", RefusalReason::kOpenFailed, "the output mount's root is not an open directory");
    return;
  }
  root_dev_ = st.st_dev;
  out_->used_fallback =
      options_.force_fallback || g_openat2_missing.load(std::memory_order_relaxed);
  std::vector<PendingDir> stack;
  ProcessDir(root, "", 0, &stack);
  while (!stack.empty() && !stopped_) {
    PendingDir p = std::move(stack.back());
    stack.pop_back();
    if (options_.before_open) options_.before_open(p.rel);
    const int fd = Open(p.parent->get(), p.name, O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
      RefuseOpenFailure(p.parent->get(), p.name, p.rel, -fd);
      continue;
    }
    auto dir = std::make_shared<UniqueFd>(fd);
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_dev != p.dev || st.st_ino != p.ino) {
      Refuse(p.rel, RefusalReason::kChanged, "directory was replaced between listing and opening");
      continue;
    }
    if (st.st_dev != root_dev_) {
      Refuse(p.rel, RefusalReason::kOtherFilesystem, "is on another filesystem (a mount point)");
      continue;
    }
    ProcessDir(dir, p.rel, p.depth, &stack);
  }
  // Literal declared paths of this mount that were neither collected nor refused.
  if (stopped_) return;
  const std::string prefix = target_ == "/" ? "/" : target_ + "/";
  for (const std::string& lit : literals_) {
    if (lit.size() <= prefix.size() || lit.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rel = lit.substr(prefix.size());
    // Below a refused directory (a symlink, an unsafe name...) it was not looked for: the
    // refusal says why, "absent" would not be true.
    bool refused_above = false;
    for (size_t at = rel.find('/'); at != std::string::npos && !refused_above;
         at = rel.find('/', at + 1)) {
      refused_above = seen_.count(rel.substr(0, at)) != 0;
    }
    if (seen_.count(rel) == 0 && !refused_above) out_->absent.push_back(lit);
  }
}

void Walker::ProcessDir(const std::shared_ptr<UniqueFd>& dir, const std::string& rel,
                        uint32_t depth, std::vector<PendingDir>* stack) {
  // List with a separate open file description (closedir closes it; `dir` stays usable).
  const int lfd = openat(dir->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = lfd >= 0 ? fdopendir(lfd) : nullptr;
  if (d == nullptr) {
    if (lfd >= 0) close(lfd);
    Refuse(rel, RefusalReason::kOpenFailed, std::string("listing: ") + std::strerror(errno));
    return;
  }
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    const struct dirent* e = readdir(d);
    if (e == nullptr) {
      if (errno != 0) {
        Refuse(rel, RefusalReason::kOpenFailed, std::string("listing: ") + std::strerror(errno));
      }
      break;
    }
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (++out_->entries_walked > options_.max_walk_entries) {
      Refuse(rel, RefusalReason::kWalkLimit,
             "the output mount holds more than " + std::to_string(options_.max_walk_entries) +
                 " entries; collection stopped");
      stopped_ = true;
      break;
    }
    names.emplace_back(e->d_name);
  }
  closedir(d);
  if (stopped_) return;
  std::sort(names.begin(), names.end());
  std::vector<PendingDir> subdirs;
  for (const std::string& name : names) {
    HandleEntry(dir, name, JoinRel(rel, name), depth, &subdirs);
  }
  // Depth first, in name order.
  for (auto it = subdirs.rbegin(); it != subdirs.rend(); ++it) stack->push_back(std::move(*it));
}

void Walker::HandleEntry(const std::shared_ptr<UniqueFd>& dir, const std::string& name,
                         const std::string& rel, uint32_t depth, std::vector<PendingDir>* subdirs) {
  const std::string sandbox = SandboxPath(rel);
  std::vector<size_t> matched = validators_.FileValidatorsFor(sandbox);
  const bool beneath = validators_.FileValidatorsCouldMatchBeneath(sandbox);
  if (matched.empty() && !beneath) return;  // not ours: never stat'ed, never opened
  struct stat st;
  if (fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) RefuseErrno(rel, "fstatat", errno, matched);
    return;
  }
  // Before anything is opened or entered: a name the report cannot show as it is.
  if (!matched.empty() || (beneath && S_ISDIR(st.st_mode))) {
    const std::string problem = UnsafeNameProblem(name);
    if (!problem.empty()) {
      Refuse(rel, RefusalReason::kBadName,
             "the name \"" + EscapeName(name) + "\" holds " + problem +
                 "; such names are neither read nor delivered" +
                 (S_ISDIR(st.st_mode) ? " (a directory: nothing below it is collected)" : ""),
             matched);
      return;
    }
  }
  if (S_ISDIR(st.st_mode)) {
    if (literals_.count(sandbox) != 0) {
      Refuse(rel, RefusalReason::kNotRegular, "is a directory, not a regular file", matched);
      return;
    }
    if (!beneath) return;
    if (depth + 1 > options_.max_walk_depth) {
      Refuse(rel, RefusalReason::kWalkLimit,
             "directory deeper than " + std::to_string(options_.max_walk_depth) + " levels");
      return;
    }
    subdirs->push_back(PendingDir{dir, name, rel, depth + 1, st.st_dev, st.st_ino});
    return;
  }
  if (matched.empty()) {
    // Not itself declared, but a declared path may continue below it: a symlink here would lead
    // the collection out of the mount.
    if (S_ISLNK(st.st_mode)) {
      Refuse(rel, RefusalReason::kSymlink,
             "a symlink where a declared output path needs a directory (never followed)");
    }
    return;
  }
  switch (st.st_mode & S_IFMT) {
    case S_IFREG:
      CollectRegular(dir->get(), name, rel, st, std::move(matched));
      return;
    case S_IFLNK:
      Refuse(rel, RefusalReason::kSymlink, "is a symlink (never followed)", matched);
      return;
    case S_IFIFO:
      Refuse(rel, RefusalReason::kFifo, "is a FIFO", matched);
      return;
    case S_IFCHR:
    case S_IFBLK:
      Refuse(rel, RefusalReason::kDevice, "is a device node", matched);
      return;
    case S_IFSOCK:
      Refuse(rel, RefusalReason::kSocket, "is a socket", matched);
      return;
    default:
      Refuse(rel, RefusalReason::kNotRegular, "is not a regular file", matched);
      return;
  }
}

void Walker::CollectRegular(int dirfd, const std::string& name, const std::string& rel,
                            const struct stat& listed, std::vector<size_t> matched) {
  if (++budget_->files > caps_.max_files) {
    Refuse(rel, RefusalReason::kTooMany,
           "more than outputs.max_files = " + std::to_string(caps_.max_files) + " files", matched);
    return;
  }
  if (options_.before_open) options_.before_open(rel);
  const int raw = Open(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (raw < 0) {
    RefuseOpenFailure(dirfd, name, rel, -raw, matched);
    return;
  }
  UniqueFd fd(raw);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    RefuseErrno(rel, "fstat", errno, matched);
    return;
  }
  if (!S_ISREG(st.st_mode) || st.st_dev != listed.st_dev || st.st_ino != listed.st_ino) {
    Refuse(rel, RefusalReason::kChanged, "was replaced between listing and opening", matched);
    return;
  }
  if (st.st_dev != root_dev_) {
    Refuse(rel, RefusalReason::kOtherFilesystem, "is on another filesystem", matched);
    return;
  }
  if (st.st_nlink != 1) {
    Refuse(rel, RefusalReason::kHardlink,
           "has " + std::to_string(st.st_nlink) + " hard links (only single-link files)", matched);
    return;
  }
  // Sizes before reading: the validators' caps, in chain order, decide how much to read.
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  uint64_t want = size;
  for (size_t k = 0; k < matched.size(); ++k) {
    const plan::Validator& v = validators_.validators()[matched[k]];
    if (v.max_bytes == 0 || want <= v.max_bytes) continue;
    if (v.on_overflow == plan::OverflowAction::kTruncate) {
      want = v.max_bytes;
    } else if (k == 0) {
      Refuse(rel, RefusalReason::kTooBig,
             "is " + std::to_string(size) +
                 " bytes, more than max = " + std::to_string(v.max_bytes) + " (not read)",
             matched);
      return;
    } else {
      break;  // a later validator rejects what the earlier ones deliver: the chain decides
    }
  }
  if (budget_->bytes + want > caps_.max_total_bytes) {
    Refuse(rel, RefusalReason::kTotalTooBig,
           "reading its " + std::to_string(want) + " bytes would exceed outputs.max_total = " +
               std::to_string(caps_.max_total_bytes) + " (not read)",
           matched);
    return;
  }
  CollectedFile f;
  f.bytes.resize(want);
  uint64_t got = 0;
  while (got < want) {
    const ssize_t r = pread(fd.get(), f.bytes.data() + got, want - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      RefuseErrno(rel, "read", errno, matched);
      return;
    }
    if (r == 0) break;
    got += static_cast<uint64_t>(r);
  }
  if (got < want) {
    Refuse(rel, RefusalReason::kChanged, "shrank while it was read", matched);
    return;
  }
  if (want == size) {
    char extra;
    if (pread(fd.get(), &extra, 1, static_cast<off_t>(size)) > 0) {
      Refuse(rel, RefusalReason::kChanged, "grew while it was read", matched);
      return;
    }
  }
  budget_->bytes += want;
  f.sandbox_path = SandboxPath(rel);
  f.relative_path = rel;
  f.validators = std::move(matched);
  f.size = size;
  f.truncated = want < size;
  f.sha256 = Sha256Hex(f.bytes);
  seen_.insert(rel);
  out_->files.push_back(std::move(f));
}

}  // namespace

const char* RefusalReasonName(RefusalReason r) {
  switch (r) {
    case RefusalReason::kSymlink:
      return "symlink";
    case RefusalReason::kFifo:
      return "fifo";
    case RefusalReason::kDevice:
      return "device";
    case RefusalReason::kSocket:
      return "socket";
    case RefusalReason::kNotRegular:
      return "not-regular";
    case RefusalReason::kHardlink:
      return "hardlink";
    case RefusalReason::kTooBig:
      return "too-big";
    case RefusalReason::kTooMany:
      return "too-many";
    case RefusalReason::kTotalTooBig:
      return "total-too-big";
    case RefusalReason::kChanged:
      return "changed";
    case RefusalReason::kOtherFilesystem:
      return "other-filesystem";
    case RefusalReason::kWalkLimit:
      return "walk-limit";
    case RefusalReason::kBadName:
      return "unsafe-name";
    case RefusalReason::kOpenFailed:
      return "open-failed";
    case RefusalReason::kReadFailed:
      return "read-failed";
  }
  return "?";
}

std::string UnsafeNameProblem(std::string_view component) {
  const auto* p = reinterpret_cast<const unsigned char*>(component.data());
  const auto* end = p + component.size();
  while (p < end) {
    const Utf8Char c = DecodeUtf8(p, end);
    if (c.status != Utf8Status::kOk) {
      char buf[48];
      std::snprintf(
          buf, sizeof buf, "invalid UTF-8 (byte 0x%02X at offset %zu)", *p,
          static_cast<size_t>(p - reinterpret_cast<const unsigned char*>(component.data())));
      return buf;
    }
    const uint32_t cp = c.code_point;
    if (cp == '\n' || cp == '\r') return "a line break (" + CodePoint(cp) + ")";
    if (cp < 0x20 || cp == 0x7F) return "a control character (" + CodePoint(cp) + ")";
    if (cp >= 0x80 && cp <= 0x9F) return "a C1 control character (" + CodePoint(cp) + ")";
    if (IsBidiControl(cp) || cp == 0x200E || cp == 0x200F || cp == 0x061C) {
      return "a bidirectional control (" + CodePoint(cp) + ")";
    }
    if (IsInvisibleFormat(cp)) return "an invisible formatting character (" + CodePoint(cp) + ")";
    p += c.length;
  }
  return "";
}

MountCollection CollectMount(int mount_dirfd, const plan::Mount& mount,
                             const ValidatorSet& validators, const plan::OutputCollection& caps,
                             CollectBudget* budget, const CollectOptions& options) {
  MountCollection out;
  out.mount_target = Normalise(mount.target);
  Walker walker(mount, validators, caps, budget, options, &out);
  walker.Run(mount_dirfd);
  return out;
}

Status WriteFileBeneath(int dest_dirfd, std::string_view relative_path, std::string_view bytes,
                        const WriteOptions& options) {
  const std::vector<std::string_view> parts = SplitPath(relative_path);
  const std::string shown = EscapeForLog(relative_path, {.max_output = 300});
  if (parts.empty()) return Status::InvalidArgument("empty output path");
  for (std::string_view p : parts) {
    if (!IsSingleComponent(p)) {
      return Status::InvalidArgument("output path \"" + shown + "\" has a bad component");
    }
  }
  UniqueFd cur(fcntl(dest_dirfd, F_DUPFD_CLOEXEC, 3));
  if (!cur) return Status::Errno("fcntl(F_DUPFD_CLOEXEC)", "destination", errno);
  bool fallback = false;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string name(parts[i]);
    if (mkdirat(cur.get(), name.c_str(), options.dir_mode) != 0 && errno != EEXIST) {
      return Status::Errno("mkdirat", shown, errno);
    }
    const int fd =
        OpenComponent(cur.get(), name, O_RDONLY | O_DIRECTORY, options.force_fallback, &fallback);
    if (fd < 0) {
      if (-fd == ELOOP || -fd == ENOTDIR) {
        return Status::PermissionDenied("destination component of \"" + shown +
                                        "\" is a symlink or not a directory; not followed");
      }
      return Status::Errno("openat2", shown, -fd);
    }
    cur.Reset(fd);
  }
  const std::string leaf(parts.back());
  // Security: O_CREAT|O_EXCL never follows a symlink and never opens an existing file.
  UniqueFd out(openat(cur.get(), leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      options.file_mode));
  if (!out) {
    if (errno == EEXIST) {
      return Status::FailedPrecondition("\"" + shown +
                                        "\" already exists in the destination; "
                                        "not overwritten");
    }
    return Status::Errno("openat", shown, errno);
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = write(out.get(), bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      const int err = errno;
      unlinkat(cur.get(), leaf.c_str(), 0);
      return Status::Errno("write", shown, err);
    }
    done += static_cast<size_t>(w);
  }
  if (close(out.Release()) != 0) {
    const int err = errno;
    unlinkat(cur.get(), leaf.c_str(), 0);
    return Status::Errno("close", shown, err);
  }
  return Status::Ok();
}

}  // namespace safex::output
