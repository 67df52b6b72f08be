#include "drivers/sandbox_report_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace safex::drivers {
namespace {

bool WriteFully(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// One source: "NAME LENGTH\n" and at most 16 KiB of the file (the whole report then fits the
// microVM channel's data frame).
bool SendSource(int fd, const char* name, const char* path) {
  static char buf[16 * 1024];
  size_t len = 0;
  const int in = open(path, O_RDONLY | O_CLOEXEC);
  if (in >= 0) {
    for (;;) {
      const ssize_t r = read(in, buf + len, sizeof buf - len);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      len += static_cast<size_t>(r);
      if (len == sizeof buf) break;
    }
    close(in);
  }
  char head[64];
  size_t h = 0;
  for (const char* c = name; *c != '\0' && h < 40; ++c) head[h++] = *c;
  head[h++] = ' ';
  char digits[24];
  size_t d = 0;
  size_t v = len;
  do {
    digits[d++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  while (d > 0) head[h++] = digits[--d];
  head[h++] = '\n';
  return WriteFully(fd, head, h) && WriteFully(fd, buf, len);
}

}  // namespace

bool WriteSandboxReport(int fd) {
  static const char kHeader[] = "SAFEX-LAUNCH 1\n";
  return WriteFully(fd, kHeader, sizeof kHeader - 1) &&
         SendSource(fd, "status", "/proc/self/status") &&
         SendSource(fd, "limits", "/proc/self/limits") &&
         SendSource(fd, "mountinfo", "/proc/self/mountinfo") && WriteFully(fd, "end\n", 4);
}

}  // namespace safex::drivers
