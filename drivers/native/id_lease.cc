#include "drivers/native/id_lease.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <functional>

namespace safex::drivers::native {
namespace {

Status EnsurePrivateDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::Errno("mkdir", dir, errno);
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return Status::Errno("lstat", dir, errno);
  // Security: the lock files decide which run owns which host id; only their owner (root, for
  // the supervisor) may touch them.
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0077) != 0) {
    return Status::FailedPrecondition(dir + " must be a directory of the supervisor's, mode 0700");
  }
  return Status::Ok();
}

// The holder's run id, for the operator (`cat <dir>/<id>`); the lock is what counts.
void WriteHolder(int fd, const std::string& run_id) {
  if (ftruncate(fd, 0) != 0) return;
  const std::string text = run_id + "\n";
  (void)!pwrite(fd, text.data(), text.size(), 0);
}

}  // namespace

Result<IdLease> IdLease::Acquire(const std::string& dir, uint32_t first, uint32_t count,
                                 const std::string& run_id) {
  if (count == 0) return Status::InvalidArgument("native: the id range is empty");
  SAFEX_RETURN_IF_ERROR(EnsurePrivateDir(dir));
  const uint32_t start = static_cast<uint32_t>(std::hash<std::string>{}(run_id) % count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t id = first + (start + i) % count;
    const std::string path = dir + "/" + std::to_string(id);
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) return Status::Errno("open", path, errno).With("native id lease");
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) continue;  // a live run holds it
      return Status::Errno("flock", path, errno).With("native id lease");
    }
    WriteHolder(fd.get(), run_id);
    IdLease lease;
    lease.fd_ = std::move(fd);
    lease.id_ = id;
    return lease;
  }
  return Status::Unavailable("native: all " + std::to_string(count) +
                             " host ids of the range are held by live runs");
}

Status CheckIdsUnassigned(uint32_t first, uint32_t count, const std::string& passwd,
                          const std::string& group) {
  const uint64_t end = static_cast<uint64_t>(first) + count;
  for (const std::string& file : {passwd, group}) {
    std::ifstream in(file);
    if (!in) continue;  // no such database here: nothing can be assigned in it
    for (std::string line; std::getline(in, line);) {
      // name:x:ID:...  (passwd: uid, then gid; group: gid)
      const size_t a = line.find(':');
      const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
      if (b == std::string::npos) continue;
      const size_t c = line.find(':', b + 1);
      uint64_t id = 0;
      bool digits = c != std::string::npos && c > b + 1;
      for (size_t i = b + 1; digits && i < c; ++i) {
        digits = line[i] >= '0' && line[i] <= '9';
        id = id * 10 + static_cast<uint64_t>(line[i] - '0');
        digits = digits && id < (1ull << 32);
      }
      if (digits && id >= first && id < end) {
        return Status::FailedPrecondition(
            "native: " + file + " names " + line.substr(0, a) + " with id " + std::to_string(id) +
            ", inside the runs' id range " + std::to_string(first) + "-" + std::to_string(end - 1) +
            " (host config: backends { native { first_id ids } })");
      }
    }
  }
  return Status::Ok();
}

}  // namespace safex::drivers::native
