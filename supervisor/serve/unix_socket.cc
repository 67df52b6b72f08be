#include "supervisor/serve/unix_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace safex::serve {
namespace {

Result<sockaddr_un> Address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("socket path must be 1-107 bytes: '" + path + "'");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

}  // namespace

Result<UniqueFd> ListenUnix(const std::string& path, mode_t mode, std::optional<gid_t> gid,
                            int backlog) {
  SAFEX_ASSIGN_OR_RETURN(sockaddr_un addr, Address(path));
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    std::string parent = path.substr(0, slash);
    if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::Errno("mkdir", parent, errno);
    }
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::FailedPrecondition(path + " exists and is not a socket; not replacing it");
    }
    if (unlink(path.c_str()) != 0) return Status::Errno("unlink", path, errno);
  }
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return Status::Errno("socket", errno);
  // The file bind() creates must not be connectable under a loose mode before chmod: nobody can
  // connect before listen(), and chmod/chown come first.
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::Errno("bind", path, errno);
  }
  if (gid && chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
    int e = errno;
    unlink(path.c_str());
    return Status::Errno("chown", path, e);
  }
  if (chmod(path.c_str(), mode) != 0) {
    int e = errno;
    unlink(path.c_str());
    return Status::Errno("chmod", path, e);
  }
  if (listen(fd.get(), backlog) != 0) {
    int e = errno;
    unlink(path.c_str());
    return Status::Errno("listen", path, e);
  }
  return fd;
}

Result<Caller> PeerOf(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::Errno("getsockopt(SO_PEERCRED)", errno);
  }
  Caller c;
  c.uid = cred.uid;
  c.gid = cred.gid;
  c.pid = cred.pid;
#ifdef SO_PEERGROUPS
  gid_t groups[256];
  socklen_t glen = sizeof(groups);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0) {
    for (size_t i = 0; i < glen / sizeof(gid_t); ++i) c.groups.push_back(groups[i]);
  }
  // ERANGE (more than 256 groups): the primary gid still counts; the rest are not consulted.
#endif
  return c;
}

Result<UniqueFd> ConnectUnix(const std::string& path) {
  SAFEX_ASSIGN_OR_RETURN(sockaddr_un addr, Address(path));
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Status::Errno("socket", errno);
  while (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EINTR) continue;
    int e = errno;
    if (e == ENOENT || e == ECONNREFUSED) {
      return Status::Unavailable("the safex service is not running (nothing listens on " + path +
                                 ": " + std::strerror(e) + "); start it with `safex serve` or "
                                 "`systemctl start safex`");
    }
    if (e == EACCES || e == EPERM) {
      return Status::PermissionDenied("no permission to connect to " + path +
                                      " (the socket's group must include you)");
    }
    return Status::Errno("connect", path, e);
  }
  return fd;
}

}  // namespace safex::serve
