#include "drivers/exec_candidates.h"

#include <unistd.h>

#include <cerrno>

namespace safex::drivers {

std::vector<std::string> ExecCandidates(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos) return {program};
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = path.substr(start, end - start);
    start = end + 1;
    if (dir.empty() || dir[0] != '/') continue;
    out.push_back(dir + "/" + program);
  }
  return out;
}

int ExecFirstCandidate(const char* const* candidates, char* const* argv, char* const* envp) {
  int err = ENOENT;
  bool saw_eacces = false;
  for (const char* const* c = candidates; *c != nullptr; ++c) {
    execve(*c, argv, envp);
    err = errno;
    if (err == EACCES) saw_eacces = true;
    if (err != ENOENT && err != ENOTDIR && err != EACCES) break;
  }
  if (saw_eacces && (err == ENOENT || err == ENOTDIR)) err = EACCES;
  return err;
}

}  // namespace safex::drivers
