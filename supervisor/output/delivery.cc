#include "supervisor/output/delivery.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "supervisor/output/escape.h"

namespace safex::output {
namespace {

std::vector<std::string> Components(std::string_view path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    out.emplace_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

bool GoodComponent(const std::string& c) {
  return !c.empty() && c != "." && c != ".." && c.find('\0') == std::string::npos &&
         c.find('/') == std::string::npos;
}

std::string Shown(std::string_view path) { return EscapeForLog(path, {.max_output = 300}); }

// Security: a single component with O_NOFOLLOW cannot leave `dirfd` or follow a symlink.
int OpenDir(int dirfd, const std::string& name) {
  return openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Why `components` cannot be written below `dest` without overwriting or following anything;
// "" when it can.
std::string Conflict(int dest, const std::vector<std::string>& components) {
  UniqueFd cur(fcntl(dest, F_DUPFD_CLOEXEC, 3));
  if (!cur) return "the destination cannot be opened";
  for (size_t i = 0; i < components.size(); ++i) {
    struct stat st {};
    if (fstatat(cur.get(), components[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return errno == ENOENT ? "" : "cannot be checked (" + std::string(strerror(errno)) + ")";
    }
    if (i + 1 == components.size()) return "already exists (not overwritten)";
    if (!S_ISDIR(st.st_mode)) {
      return S_ISLNK(st.st_mode) ? "has a symlink on its way (not followed)"
                                 : "has a non-directory on its way";
    }
    cur.Reset(OpenDir(cur.get(), components[i]));
    if (!cur) return "cannot be opened on its way (" + std::string(strerror(errno)) + ")";
  }
  return "";
}

}  // namespace

Result<Delivery> Delivery::Write(int dest_dirfd, const std::vector<DeliveryItem>& items,
                                 const DeliveryOptions& options) {
  Delivery d;
  d.dest_.Reset(fcntl(dest_dirfd, F_DUPFD_CLOEXEC, 3));
  if (!d.dest_) return Status::Errno("fcntl(F_DUPFD_CLOEXEC)", "output directory", errno);

  // 1. Every name, before anything is written.
  std::vector<std::vector<std::string>> paths;
  std::set<std::string> seen;
  std::string conflicts;
  int conflict_count = 0;
  for (const DeliveryItem& item : items) {
    std::vector<std::string> c = Components(item.relative_path);
    for (const std::string& part : c) {
      if (!GoodComponent(part)) {
        return Status::InvalidArgument("output path \"" + Shown(item.relative_path) +
                                       "\" has a bad component");
      }
    }
    if (!seen.insert(item.relative_path).second) {
      return Status::InvalidArgument("output path \"" + Shown(item.relative_path) +
                                     "\" is delivered twice");
    }
    std::string why = Conflict(d.dest_.get(), c);
    if (!why.empty() && ++conflict_count <= 3) {
      conflicts +=
          (conflicts.empty() ? "" : "; ") + ("\"" + Shown(item.relative_path) + "\" ") + why;
    }
    paths.push_back(std::move(c));
  }
  if (conflict_count > 0) {
    if (conflict_count > 3) conflicts += "; and " + std::to_string(conflict_count - 3) + " more";
    return Status::FailedPrecondition("nothing was written: " + conflicts);
  }

  // 2. Write them all; any failure removes what was written.
  for (size_t i = 0; i < items.size(); ++i) {
    Status st = options.before_write ? options.before_write(i) : Status::Ok();
    const std::vector<std::string>& c = paths[i];
    UniqueFd cur(fcntl(d.dest_.get(), F_DUPFD_CLOEXEC, 3));
    if (st.ok() && !cur) st = Status::Errno("fcntl", "output directory", errno);
    for (size_t k = 0; st.ok() && k + 1 < c.size(); ++k) {
      bool made = mkdirat(cur.get(), c[k].c_str(), options.dir_mode) == 0;
      if (!made && errno != EEXIST) {
        st = Status::Errno("mkdirat", Shown(items[i].relative_path), errno);
        break;
      }
      UniqueFd next(OpenDir(cur.get(), c[k]));
      if (!next) {
        st = errno == ELOOP || errno == ENOTDIR
                 ? Status::PermissionDenied("a component of \"" + Shown(items[i].relative_path) +
                                            "\" became a symlink or a file; not followed")
                 : Status::Errno("openat", Shown(items[i].relative_path), errno);
        break;
      }
      if (made) {
        struct stat dst {};
        fstat(next.get(), &dst);
        d.dirs_.push_back(
            {{c.begin(), c.begin() + static_cast<long>(k) + 1}, dst.st_dev, dst.st_ino, 0, {}});
      }
      cur = std::move(next);
    }
    if (st.ok()) {
      // Security: O_CREAT|O_EXCL never follows a symlink and never opens an existing file.
      UniqueFd out(openat(cur.get(), c.back().c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, options.file_mode));
      if (!out) {
        st = Status::Errno("openat", Shown(items[i].relative_path), errno);
      } else {
        std::string_view left = items[i].bytes;
        while (st.ok() && !left.empty()) {
          ssize_t w = write(out.get(), left.data(), left.size());
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) {
            st = Status::Errno("write", Shown(items[i].relative_path), errno);
          } else {
            left.remove_prefix(static_cast<size_t>(w));
          }
        }
        struct stat fst {};
        if (fstat(out.get(), &fst) == 0) {
          d.files_.push_back({c, fst.st_dev, fst.st_ino, fst.st_size, fst.st_mtim});
        }
        if (st.ok() && close(out.Release()) != 0) {
          st = Status::Errno("close", Shown(items[i].relative_path), errno);
        }
      }
    }
    if (!st.ok()) {
      Status rb = d.Rollback();
      std::string msg = st.message() + (rb.ok() ? "; the files written before it were removed"
                                                : "; removing what was written: " + rb.message());
      return Status::Internal(msg);
    }
  }
  return d;
}

Status Delivery::Remove(const Created& c, bool dir) {
  UniqueFd cur(fcntl(dest_.get(), F_DUPFD_CLOEXEC, 3));
  if (!cur) return Status::Errno("fcntl", "output directory", errno);
  for (size_t k = 0; k + 1 < c.components.size(); ++k) {
    cur.Reset(OpenDir(cur.get(), c.components[k]));
    if (!cur) return Status::Ok();  // gone or replaced: nothing of ours to remove there
  }
  const std::string& leaf = c.components.back();
  struct stat st {};
  if (fstatat(cur.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Status::Ok();
  if (st.st_dev != c.dev || st.st_ino != c.ino) return Status::Ok();  // not what we made
  if (!dir && (st.st_size != c.size || st.st_mtim.tv_sec != c.mtime.tv_sec ||
               st.st_mtim.tv_nsec != c.mtime.tv_nsec)) {
    return Status::Ok();  // the same inode number, but a file someone else wrote since
  }
  if (unlinkat(cur.get(), leaf.c_str(), dir ? AT_REMOVEDIR : 0) != 0 && errno != ENOENT &&
      !(dir && errno == ENOTEMPTY)) {
    return Status::Errno(dir ? "rmdir" : "unlink", leaf, errno);
  }
  return Status::Ok();
}

Status Delivery::Rollback() {
  if (!dest_) return Status::Ok();
  std::string errors;
  for (auto it = files_.rbegin(); it != files_.rend(); ++it) {
    if (Status st = Remove(*it, false); !st.ok())
      errors += (errors.empty() ? "" : "; ") + st.message();
  }
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    if (Status st = Remove(*it, true); !st.ok())
      errors += (errors.empty() ? "" : "; ") + st.message();
  }
  files_.clear();
  dirs_.clear();
  if (!errors.empty()) return Status::Internal(errors);
  return Status::Ok();
}

}  // namespace safex::output
