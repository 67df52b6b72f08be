#include "guest/heartbeat.h"

#include "guest/util.h"

namespace safex::guest {
namespace {

// The state letter: the field after the command name, which ends at the last ')' (a name may
// hold spaces and parentheses of its own).
std::string StateLetter(const std::string& stat) {
  size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return "?";
  return stat.substr(close + 2, 1);
}

}  // namespace

std::string ProcessState(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::string stat;
  if (!ReadSmallFile(dir + "/stat", &stat)) return "gone";
  std::string out = StateLetter(stat);
  std::string wchan;
  if (ReadSmallFile(dir + "/wchan", &wchan) && !wchan.empty() && wchan != "0") {
    out += ' ';
    out += TrimNewline(wchan);
  }
  return out.substr(0, microvm::kMaxHeartbeatState);
}

microvm::Heartbeat MakeHeartbeat(pid_t pid, bool exited, const WorkloadCgroup& cgroup) {
  microvm::Heartbeat h;
  h.guest_ns = BootTimeNs();
  h.cpu_ns = cgroup.CpuNs();
  h.program_exited = exited;
  h.program_state = exited ? "exited" : ProcessState(pid);
  return h;
}

}  // namespace safex::guest
