#include "common/small_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/unique_fd.h"

namespace safex {

std::optional<std::string> ReadSmallFile(const std::string& path, size_t cap) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) return std::nullopt;
  std::string text;
  char buf[4096];
  while (text.size() < cap) {
    const size_t want = std::min(sizeof buf, cap - text.size());
    const ssize_t n = read(fd.get(), buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace safex
