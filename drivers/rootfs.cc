#include "drivers/rootfs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.h"

namespace safex::drivers {
namespace {

std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string::npos) end = path.size();
    if (end > pos) out.push_back(path.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// Creates root/<target> step by step without following symlinks (the tree is ours and fresh, but
// there is no reason to trust a path more than necessary). The last component is a directory, or
// an empty file when `as_file`.
Status MakeMountPoint(int root_fd, const std::string& target, bool as_file) {
  std::vector<std::string> parts = Components(target);
  if (parts.empty()) return Status::Ok();
  UniqueFd dir(fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!dir) return Status::Errno("dup", target, errno);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p == "." || p == "..")
      return Status::InvalidArgument("mount target not normalised: " + target);
    bool last = i + 1 == parts.size();
    if (last && as_file) {
      UniqueFd f(openat(dir.get(), p.c_str(), O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (!f) return Status::Errno("openat", target, errno);
      return Status::Ok();
    }
    if (mkdirat(dir.get(), p.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::Errno("mkdirat", target, errno);
    }
    UniqueFd next(openat(dir.get(), p.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return Status::Errno("openat", target, errno);
    dir = std::move(next);
  }
  return Status::Ok();
}

Status WriteNewFile(int dir_fd, const char* name, const std::string& content) {
  UniqueFd f(openat(dir_fd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!f) return Status::Errno("openat", std::string("etc/") + name, errno);
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = write(f.get(), content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("write", std::string("etc/") + name, errno);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

bool UnderEtc(const std::string& target) { return target == "/etc" || target.starts_with("/etc/"); }

}  // namespace

std::string PasswdFile(uint32_t uid, uint32_t gid) {
  std::string out = "root:x:0:0:root:/:/sbin/nologin\n";
  if (uid != 0) {
    std::string name = uid == 65534 ? "nobody" : "sandbox";
    out += name + ":x:" + std::to_string(uid) + ":" + std::to_string(gid) + ":" + name +
           ":/:/sbin/nologin\n";
  }
  return out;
}

std::string GroupFile(uint32_t gid) {
  std::string out = "root:x:0:\n";
  if (gid != 0) {
    out += std::string(gid == 65534 ? "nogroup" : "sandbox") + ":x:" + std::to_string(gid) + ":\n";
  }
  return out;
}

std::string DefaultHostsFile() {
  return "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
}

Status PrepareRootfs(const std::string& root, const plan::Plan& plan,
                     const std::vector<std::string>& mount_sources, const std::string& hosts,
                     const std::vector<std::string>& infrastructure) {
  UniqueFd root_fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root_fd) return Status::Errno("open", root, errno);
  if (fchmod(root_fd.get(), 0755) != 0) return Status::Errno("fchmod", root, errno);

  for (const std::string& d : infrastructure) {
    SAFEX_RETURN_IF_ERROR(MakeMountPoint(root_fd.get(), d, false));
  }
  bool etc_mounted = false;
  for (size_t i = 0; i < plan.mounts.size(); ++i) {
    const plan::Mount& m = plan.mounts[i];
    bool as_file = false;
    if (m.kind == plan::MountKind::kBind && i < mount_sources.size()) {
      struct stat st;
      if (stat(mount_sources[i].c_str(), &st) != 0) {
        return Status::Errno("stat", "bind source " + mount_sources[i], errno);
      }
      as_file = !S_ISDIR(st.st_mode);
    }
    if (m.target == "/etc") etc_mounted = true;
    SAFEX_RETURN_IF_ERROR(MakeMountPoint(root_fd.get(), m.target, as_file));
  }
  if (etc_mounted) return Status::Ok();  // the plan's /etc shadows anything written here

  SAFEX_RETURN_IF_ERROR(MakeMountPoint(root_fd.get(), "/etc", false));
  UniqueFd etc(openat(root_fd.get(), "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!etc) return Status::Errno("openat", "etc", errno);
  struct File {
    const char* name;
    std::string content;
  };
  const File files[] = {
      {"passwd", PasswdFile(plan.process.uid, plan.process.gid)},
      {"group", GroupFile(plan.process.gid)},
      {"hosts", hosts.empty() ? DefaultHostsFile() : hosts},
      {"nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"},
  };
  for (const File& f : files) {
    // A plan mount below /etc (e.g. a bind of one file) takes precedence over the generated file.
    bool shadowed = false;
    for (const plan::Mount& m : plan.mounts) {
      shadowed = shadowed || (UnderEtc(m.target) && m.target == std::string("/etc/") + f.name);
    }
    if (shadowed) continue;
    int fd = openat(etc.get(), f.name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {  // a mount point was created there already
      close(fd);
      continue;
    }
    SAFEX_RETURN_IF_ERROR(WriteNewFile(etc.get(), f.name, f.content));
  }
  return Status::Ok();
}

}  // namespace safex::drivers
