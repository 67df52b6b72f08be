#include "drivers/driver.h"

namespace safex::drivers {

const char* LimitHitName(LimitHit l) {
  switch (l) {
    case LimitHit::kNone: return "none";
    case LimitHit::kWallTime: return "wall_time";
    case LimitHit::kCpuTime: return "cpu_time";
    case LimitHit::kMemory: return "memory";
    case LimitHit::kPids: return "pids";
    case LimitHit::kOutput: return "output";
    case LimitHit::kDisk: return "disk";
    case LimitHit::kOpenFiles: return "open_files";
  }
  return "unknown";
}

}  // namespace safex::drivers
