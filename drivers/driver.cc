#include "drivers/driver.h"

#include <string>

namespace safex::drivers {

// What every backend needs: execve(2) takes NUL-terminated strings, so a NUL byte inside an
// argument would silently cut it. Any other byte is legal on Linux and carried as it is (a
// backend whose runtime cannot carry some bytes says so in its own CheckRequest).
Status Driver::CheckRequest(const plan::Plan& /*plan*/, const RunRequest& request) const {
  if (request.argv.empty() || request.argv[0].empty()) {
    return Status::InvalidArgument("argv is empty");
  }
  for (size_t i = 0; i < request.argv.size(); ++i) {
    if (request.argv[i].find('\0') != std::string::npos) {
      return Status::InvalidArgument("argv[" + std::to_string(i) +
                                     "] contains a NUL byte, which execve cannot carry");
    }
  }
  return Status::Ok();
}

const char* LimitHitName(LimitHit l) {
  switch (l) {
    case LimitHit::kNone:
      return "none";
    case LimitHit::kWallTime:
      return "wall_time";
    case LimitHit::kCpuTime:
      return "cpu_time";
    case LimitHit::kMemory:
      return "memory";
    case LimitHit::kPids:
      return "pids";
    case LimitHit::kOutput:
      return "output";
    case LimitHit::kDisk:
      return "disk";
    case LimitHit::kOpenFiles:
      return "open_files";
  }
  return "unknown";
}

}  // namespace safex::drivers
