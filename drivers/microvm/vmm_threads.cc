#include "drivers/microvm/vmm_threads.h"

#include <dirent.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "common/proc_stat.h"
#include "common/small_file.h"
#include "drivers/microvm/vm_session.h"

namespace safex::microvm {
namespace {

struct Thread {
  std::string comm, wchan;
  char state = '?';
  int64_t cpu_ns = 0;
};

std::vector<Thread> ReadThreads(const std::string& task_dir) {
  std::vector<Thread> threads;
  DIR* d = opendir(task_dir.c_str());
  if (d == nullptr) return threads;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string dir = task_dir + "/" + e->d_name;
    std::optional<ProcStat> st = ParseProcStat(ReadSmallFile(dir + "/stat", 4096).value_or(""));
    if (!st) continue;  // the thread ended meanwhile
    Thread t;
    t.comm = st->comm;
    t.state = st->state;
    t.cpu_ns = TicksToNs(st->utime_ticks + st->stime_ticks);
    t.wchan = ReadSmallFile(dir + "/wchan", 256).value_or("");
    if (t.wchan == "0") t.wchan.clear();
    threads.push_back(std::move(t));
  }
  closedir(d);
  return threads;
}

}  // namespace

pid_t PidOfPidfd(int fd) {
  const std::string info =
      ReadSmallFile("/proc/self/fdinfo/" + std::to_string(fd), 4096).value_or("");
  const size_t at = info.find("\nPid:");
  if (at == std::string::npos) return 0;
  const long pid = std::strtol(info.c_str() + at + 5, nullptr, 10);
  return pid > 0 ? static_cast<pid_t>(pid) : 0;
}

std::string VmmThreads(pid_t vmm_pid, size_t max_bytes) {
  if (vmm_pid <= 0) return "";
  std::vector<Thread> threads = ReadThreads("/proc/" + std::to_string(vmm_pid) + "/task");
  std::stable_sort(threads.begin(), threads.end(),
                   [](const Thread& a, const Thread& b) { return a.cpu_ns > b.cpu_ns; });
  std::string out;
  for (const Thread& t : threads) {
    std::string one = fmt::format("{} {}{}{} {} ms", t.comm, t.state, t.wchan.empty() ? "" : " ",
                                  t.wchan, t.cpu_ns / 1000000);
    if (out.size() + one.size() + 2 > max_bytes) break;
    out += (out.empty() ? "" : "; ") + one;
  }
  // Thread names are QEMU's to set, and QEMU runs beside a guest that may have broken into it.
  return Sanitize(out, max_bytes);
}

}  // namespace safex::microvm
