#include "drivers/gvisor/visible_cpus.h"

#include <string>
#include <vector>

namespace safex::drivers::gvisor {

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
