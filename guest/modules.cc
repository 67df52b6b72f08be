#include "guest/modules.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/small_file.h"
#include "guest/util.h"

namespace safex::guest {

std::string LoadModules(const std::string& dir) {
  const std::optional<std::string> read = ReadSmallFile(dir + "/load.order");
  if (!read) return ErrnoMessage("read " + dir + "/load.order");
  const std::string& order = *read;
  size_t start = 0;
  while (start < order.size()) {
    size_t end = order.find('\n', start);
    if (end == std::string::npos) end = order.size();
    std::string name(TrimNewline(std::string_view(order).substr(start, end - start)));
    start = end + 1;
    if (name.empty() || name[0] == '#') continue;
    if (name.find('/') != std::string::npos) return "bad module name in load.order: " + name;
    std::string path = dir + "/" + name;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoMessage("open " + path);
    long rc = syscall(SYS_finit_module, fd, "", 0);
    int e = errno;
    close(fd);
    if (rc != 0 && e != EEXIST) return "finit_module(" + name + "): " + std::strerror(e);
  }
  return "";
}

}  // namespace safex::guest
