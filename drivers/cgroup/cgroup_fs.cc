#include "drivers/cgroup/cgroup_fs.h"

#include <fcntl.h>
#include <signal.h>
#include "common/pidfd.h"
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "common/unique_fd.h"

namespace safex::drivers::cgroup {
namespace {

bool ListsPid(const std::string& procs, pid_t pid) {
  size_t pos = 0;
  while (pos < procs.size()) {
    size_t end = procs.find('\n', pos);
    if (end == std::string::npos) end = procs.size();
    pid_t v = 0;
    auto [p, ec] = std::from_chars(procs.data() + pos, procs.data() + end, v);
    if (ec == std::errc() && p == procs.data() + end && v == pid) return true;
    pos = end + 1;
  }
  return false;
}

}  // namespace

int HostCgroupFs::MakeDir(const std::string& path) {
  return mkdir(path.c_str(), 0755) == 0 ? 0 : errno;
}

int HostCgroupFs::RemoveDir(const std::string& path) {
  return rmdir(path.c_str()) == 0 ? 0 : errno;
}

int HostCgroupFs::WriteFile(const std::string& path, std::string_view data) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return errno;
  // cgroup control files take one value per write(); a short write is an error.
  ssize_t n = write(fd.get(), data.data(), data.size());
  if (n < 0) return errno;
  return static_cast<size_t>(n) == data.size() ? 0 : EIO;
}

int HostCgroupFs::ReadFile(const std::string& path, std::string* out) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return errno;
  out->clear();
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > (1u << 20)) return EFBIG;  // control files are small; refuse anything else
  }
  return 0;
}

bool HostCgroupFs::Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

int HostCgroupFs::KillMember(pid_t pid, const std::string& procs_file) {
  UniqueFd pidfd(PidfdOpen(pid));
  if (!pidfd) return errno == ESRCH ? 0 : errno;
  // The pidfd pins one process. If that pid is still listed in the cgroup now, the pinned process
  // is the member (a recycled pid would not be in our cgroup).
  std::string procs;
  if (int err = ReadFile(procs_file, &procs); err != 0) return err == ENOENT ? 0 : err;
  if (!ListsPid(procs, pid)) return 0;
  if (PidfdSendSignal(pidfd.get(), SIGKILL) != 0 && errno != ESRCH) return errno;
  return 0;
}

CgroupFs& HostFs() {
  static HostCgroupFs* fs = new HostCgroupFs();  // never destroyed: used from destructors
  return *fs;
}

}  // namespace safex::drivers::cgroup
