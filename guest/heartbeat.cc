#include "guest/heartbeat.h"

#include "common/proc_stat.h"
#include "common/small_file.h"
#include "guest/util.h"

namespace safex::guest {

std::string ProcessState(pid_t pid) {
  const std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat) return "gone";
  std::string out(1, stat->state);
  const std::string wchan = ReadSmallFile("/proc/" + std::to_string(pid) + "/wchan").value_or("");
  if (!wchan.empty() && wchan != "0") {
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
