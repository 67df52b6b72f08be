#include "guest/util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace safex::guest {

std::string ErrnoMessage(const std::string& what) { return what + ": " + std::strerror(errno); }

int WriteControl(const std::string& path, std::string_view data) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n = write(fd, data.data(), data.size());
  int e = n < 0 ? errno : (static_cast<size_t>(n) == data.size() ? 0 : EIO);
  close(fd);
  return e;
}

int CreateFile(const std::string& path, std::string_view data, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return errno;
  int e = WriteAll(fd, data.data(), data.size()) ? 0 : errno;
  if (fchmod(fd, mode) != 0 && e == 0) e = errno;  // umask-independent
  close(fd);
  return e;
}

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

int MakeDirs(const std::string& path) {
  if (path.empty() || path[0] != '/') return EINVAL;
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string prefix = path.substr(0, i);
      if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return errno;
    }
  }
  return 0;
}

std::string_view TrimNewline(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.remove_suffix(1);
  return s;
}

void Log(const std::string& msg) {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "[%ld.%03ld] ", static_cast<long>(ts.tv_sec),
                ts.tv_nsec / 1000000);
  std::string line = std::string(stamp) + "safex-agent: " + msg + "\n";
  // PID 1's stdout/stderr are /dev/console (set up by the kernel before exec'ing /init).
  (void)!write(2, line.data(), line.size());
}

uint64_t BootTimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace safex::guest
