#include "drivers/net/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <system_error>
#include <thread>

namespace safex::drivers::net {

Status RunInNetns(int netns_fd, const std::function<Status()>& fn) {
  Status result;
  // A fresh thread per call: its namespace change dies with it, so a failure half-way can never
  // leave a caller's (or a pooled) thread in a run's namespace.
  try {
    std::thread t([&] {
      if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) {
        result = Status::Errno("setns", "CLONE_NEWNET", errno);
        return;
      }
      result = fn();
    });
    t.join();
  } catch (const std::system_error& e) {  // thread creation failed; nothing throws out of here
    return Status::ResourceExhausted(std::string("cannot start a helper thread: ") + e.what());
  }
  return result;
}

Result<UniqueFd> OpenNetns(const std::string& path) {
  const std::string p = path.empty() ? "/proc/self/ns/net" : path;
  UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Status::Errno("open network namespace", p, errno);
  return fd;
}

Status WriteProcSys(const std::string& path, const std::string& value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return Status::Errno("open", path, errno);
  ssize_t n = ::write(fd.get(), value.data(), value.size());
  if (n < 0) return Status::Errno("write", path, errno);
  if (static_cast<size_t>(n) != value.size()) return Status::Internal("short write to " + path);
  return Status::Ok();
}

Result<std::string> ReadProcSys(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Status::Errno("open", path, errno);
  char buf[256];
  ssize_t n = ::read(fd.get(), buf, sizeof(buf));
  if (n < 0) return Status::Errno("read", path, errno);
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

namespace {

// Makes netns_dir a shared mount point, as `ip netns add` does, so that pins propagate to (and
// unmounts from) other mount namespaces, e.g. a supervisor started with a private /tmp.
Status PrepareNetnsDir(const std::string& dir) {
  // Two threads both finding "not a mount point" would stack two bind mounts; serialise (a race
  // between processes remains possible on first use, as with `ip netns add`, and is harmless).
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Status::Errno("mkdir", dir, errno);
  // Security: only changes propagation of (or binds onto itself) the operator-configured netns
  // directory; never a path taken from a policy or request.
  if (::mount("", dir.c_str(), "none", MS_SHARED | MS_REC, nullptr) == 0) return Status::Ok();
  if (errno != EINVAL) return Status::Errno("mount --make-rshared", dir, errno);
  // EINVAL: not a mount point yet. Bind it onto itself, then retry.
  if (::mount(dir.c_str(), dir.c_str(), "none", MS_BIND | MS_REC, nullptr) != 0) {
    return Status::Errno("mount --rbind", dir, errno);
  }
  if (::mount("", dir.c_str(), "none", MS_SHARED | MS_REC, nullptr) != 0) {
    return Status::Errno("mount --make-rshared", dir, errno);
  }
  return Status::Ok();
}

}  // namespace

Result<UniqueFd> CreatePinnedNetns(const std::string& netns_dir, const std::string& name) {
  SAFEX_RETURN_IF_ERROR(PrepareNetnsDir(netns_dir));
  const std::string pin = netns_dir + "/" + name;
  {
    // O_EXCL: a pin that already exists belongs to someone else (or to a leak the reconciler
    // has not removed yet); never adopt it.
    UniqueFd f(::open(pin.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444));
    if (!f) return Status::Errno("create netns pin", pin, errno);
  }
  UniqueFd ns;
  Status st = RunInNetns(-1, [&]() -> Status {
    // Security: CLONE_NEWNET on this helper thread only; the thread ends right after, and the
    // namespace lives on through the pin and the fd opened below.
    if (::unshare(CLONE_NEWNET) != 0) return Status::Errno("unshare", "CLONE_NEWNET", errno);
    // Per-namespace sysctls, not host-wide: the run's namespace only. Absent when the kernel has
    // no IPv6, which is fine.
    for (const char* p : {"/proc/sys/net/ipv6/conf/all/disable_ipv6",
                          "/proc/sys/net/ipv6/conf/default/disable_ipv6"}) {
      Status w = WriteProcSys(p, "1");
      if (!w.ok() && ::access(p, F_OK) == 0) return w;
    }
    if (::mount("/proc/thread-self/ns/net", pin.c_str(), "none", MS_BIND, nullptr) != 0) {
      return Status::Errno("bind-mount netns", pin, errno);
    }
    ns.Reset(::open(pin.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) return Status::Errno("open", pin, errno);
    return Status::Ok();
  });
  if (!st.ok()) {
    (void)RemoveNetnsPin(pin);
    return st;
  }
  return ns;
}

Status RemoveNetnsPin(const std::string& path) {
  if (::umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    return Status::Errno("umount", path, errno);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Status::Errno("unlink", path, errno);
  return Status::Ok();
}

}  // namespace safex::drivers::net
