#include "drivers/cgroup/cpuset.h"

#include <sched.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <vector>

namespace safex::drivers::cgroup {
namespace {

// "0-3,6" -> {0,1,2,3,6}; empty on anything else.
std::vector<int> ParseCpuList(const std::string& list) {
  std::vector<int> cpus;
  size_t at = 0;
  while (at < list.size()) {
    size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    const std::string part = list.substr(at, end - at);
    char* rest = nullptr;
    const long first = std::strtol(part.c_str(), &rest, 10);
    long last = first;
    if (rest != nullptr && *rest == '-') last = std::strtol(rest + 1, &rest, 10);
    if (part.empty() || rest == nullptr || *rest != '\0' || first < 0 || last < first ||
        last > 4096) {
      return {};
    }
    for (long c = first; c <= last; ++c) cpus.push_back(static_cast<int>(c));
    at = end + 1;
  }
  return cpus;
}

// Successive runs start their slice at successive CPUs.
std::atomic<uint32_t> g_next_slice{0};

// `cpus` of `allowed`, the next slice; empty when `allowed` has no more than that.
std::vector<int> NarrowCpus(const std::vector<int>& allowed, uint32_t cpus) {
  if (cpus == 0 || allowed.size() <= cpus) return {};
  const uint32_t start = g_next_slice.fetch_add(cpus) % allowed.size();
  std::vector<int> slice;
  for (uint32_t i = 0; i < cpus; ++i) slice.push_back(allowed[(start + i) % allowed.size()]);
  return slice;
}

}  // namespace

std::string NarrowCpuList(const std::string& all, uint32_t cpus) {
  std::string list;
  for (int cpu : NarrowCpus(ParseCpuList(all), cpus)) {
    list += (list.empty() ? "" : ",") + std::to_string(cpu);
  }
  return list;
}

Status NarrowCpuset(RunCgroup& cg, uint32_t cpus, std::string* restore) {
  restore->clear();
  auto all = cg.CpusetCpus();
  if (!all.ok()) return Status::Ok();  // no cpuset here: runsc shows the host's CPUs
  const std::string narrow = NarrowCpuList(*all, cpus);
  if (narrow.empty()) return Status::Ok();
  SAFEX_RETURN_IF_ERROR(cg.SetCpusetCpus(narrow));
  *restore = *all;
  return Status::Ok();
}

Status WidenCpuset(RunCgroup& cg, std::string* restore) {
  if (restore->empty()) return Status::Ok();
  SAFEX_RETURN_IF_ERROR(cg.SetCpusetCpus(*restore));
  restore->clear();
  return Status::Ok();
}

Status NarrowAffinity(pid_t pid, uint32_t cpus) {
  cpu_set_t own;
  CPU_ZERO(&own);
  if (sched_getaffinity(0, sizeof own, &own) != 0) return Status::Errno("sched_getaffinity", errno);
  std::vector<int> allowed;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &own)) allowed.push_back(cpu);
  }
  const std::vector<int> narrow = NarrowCpus(allowed, cpus);
  if (narrow.empty()) return Status::Ok();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : narrow) CPU_SET(cpu, &set);
  // Security: the sandbox's own first process, a child of this supervisor, before it execs.
  if (sched_setaffinity(pid, sizeof set, &set) != 0) {
    return Status::Errno("sched_setaffinity", std::to_string(pid), errno);
  }
  return Status::Ok();
}

}  // namespace safex::drivers::cgroup
