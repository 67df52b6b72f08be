#include "guest/workload_cgroup.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include "common/small_file.h"
#include "guest/util.h"

namespace safex::guest {
namespace {

constexpr const char* kRoot = "/sys/fs/cgroup";
constexpr uint64_t kCpuPeriodUs = 100000;

uint64_t ParseU64(std::string_view s) {
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

}  // namespace

std::optional<WorkloadCgroup> WorkloadCgroup::Create(const microvm::GuestSpec& spec,
                                                     std::string* error) {
  if (mount("cgroup2", kRoot, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    *error = ErrnoMessage("mount cgroup2");
    return std::nullopt;
  }
  if (int e = WriteControl(std::string(kRoot) + "/cgroup.subtree_control", "+memory +pids +cpu")) {
    *error = std::string("enable cgroup controllers: ") + std::strerror(e);
    return std::nullopt;
  }
  std::string dir = std::string(kRoot) + "/workload";
  if (mkdir(dir.c_str(), 0755) != 0) {
    *error = ErrnoMessage("mkdir " + dir);
    return std::nullopt;
  }
  struct Setting {
    const char* file;
    std::string value;
    bool optional;
  };
  Setting settings[] = {
      {"memory.max", std::to_string(spec.memory_bytes), false},
      // No swap is configured in the guest; the file exists only with CONFIG_SWAP.
      {"memory.swap.max", "0", true},
      // An OOM kill takes the whole workload, as the host-side cgroup does under gVisor.
      {"memory.oom.group", "1", false},
      {"pids.max", std::to_string(spec.pids), false},
      {"cpu.max",
       spec.cpus > 0 ? std::to_string(spec.cpus * kCpuPeriodUs) + " " + std::to_string(kCpuPeriodUs)
                     : std::string("max ") + std::to_string(kCpuPeriodUs),
       false},
  };
  for (const Setting& s : settings) {
    int e = WriteControl(dir + "/" + s.file, s.value);
    if (e == ENOENT && s.optional) continue;
    if (e != 0) {
      *error = "write " + dir + "/" + s.file + " = " + s.value + ": " + std::strerror(e);
      return std::nullopt;
    }
  }
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    *error = ErrnoMessage("open " + dir);
    return std::nullopt;
  }
  return WorkloadCgroup(std::move(dir), fd);
}

WorkloadCgroup::WorkloadCgroup(WorkloadCgroup&& o) noexcept
    : dir_(std::move(o.dir_)), dir_fd_(std::exchange(o.dir_fd_, -1)) {}

WorkloadCgroup::~WorkloadCgroup() {
  if (dir_fd_ >= 0) close(dir_fd_);
}

uint64_t WorkloadCgroup::Keyed(const char* file, const char* key) const {
  const std::string text = ReadSmallFile(dir_ + "/" + file).value_or("");
  std::string_view v(text);
  size_t klen = std::strlen(key);
  size_t pos = 0;
  while (pos < v.size()) {
    size_t end = v.find('\n', pos);
    if (end == std::string_view::npos) end = v.size();
    std::string_view line = v.substr(pos, end - pos);
    if (line.size() > klen && line.substr(0, klen) == key && line[klen] == ' ') {
      return ParseU64(line.substr(klen + 1));
    }
    pos = end + 1;
  }
  return 0;
}

uint64_t WorkloadCgroup::CpuNs() const { return Keyed("cpu.stat", "usage_usec") * 1000; }

uint64_t WorkloadCgroup::PeakMemoryBytes() const {
  return ParseU64(TrimNewline(ReadSmallFile(dir_ + "/memory.peak").value_or("")));
}

uint64_t WorkloadCgroup::OomKills() const { return Keyed("memory.events", "oom_kill"); }

uint64_t WorkloadCgroup::PidsLimitHits() const { return Keyed("pids.events", "max"); }

uint64_t WorkloadCgroup::MemoryMaxHits() const { return Keyed("memory.events", "max"); }

uint64_t WorkloadCgroup::MemoryFullStallUs() const {
  const std::string text = ReadSmallFile(dir_ + "/memory.pressure").value_or("");
  const size_t full = text.find("full ");
  if (full == std::string::npos) return 0;
  const size_t total = text.find("total=", full);
  if (total == std::string::npos) return 0;
  size_t end = text.find_first_not_of("0123456789", total + 6);
  if (end == std::string::npos) end = text.size();
  return ParseU64(std::string_view(text).substr(total + 6, end - total - 6));
}

void WorkloadCgroup::KillAll() const { (void)WriteControl(dir_ + "/cgroup.kill", "1"); }

}  // namespace safex::guest
