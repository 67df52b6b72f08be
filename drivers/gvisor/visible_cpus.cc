#include "drivers/gvisor/visible_cpus.h"

#include <algorithm>
#include <string>
#include <vector>

namespace safex::drivers::gvisor {

uint32_t SentryCpuCount(uint32_t cpus) { return cpus == 0 ? 0 : std::max<uint32_t>(cpus, 2); }

bool SentryCountedCpus(const cgroup::RunCgroup& cg) {
  for (const std::vector<std::string>& args : cg.MemberCommandLines()) {
    bool boot = false;
    bool counted = false;
    for (const std::string& a : args) {
      boot = boot || a == "boot";
      counted = counted || a == "--cpu-num" || a.starts_with("--cpu-num=");
    }
    if (boot && counted) return true;
  }
  return false;
}

}  // namespace safex::drivers::gvisor
