// RunCgroup::ReadEffectiveLimits: the evidence half of the cgroup code (docs/audit.md,
// "Evidence"). The limits are read from the kernel's control files after they were written, on
// the run's cgroup and on each ancestor up to the hierarchy's root, because an ancestor's
// stricter limit is what the kernel applies (the host config's delegated cgroup is one).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "common/unique_fd.h"
#include "drivers/cgroup/cgroup.h"
#include "drivers/enforcement.h"

namespace safex::drivers::cgroup {
namespace {

// Kernels write "unlimited" as "max" (v2) or as a huge number (v1 memory: the page counter's
// maximum, 9223372036854771712; v1 quota: -1).
constexpr uint64_t kUnlimitedFrom = uint64_t{1} << 62;

// "123\n" -> 123, "max" -> 0 (unlimited). nullopt when it is neither.
std::optional<uint64_t> ParseLimit(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text == "max" || text == "-1") return 0;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v >= kUnlimitedFrom ? 0 : v;
}

// Keeps the stricter of the limit so far and `v` (0 is unlimited).
void Stricter(uint64_t v, const std::string& source, uint64_t* limit, std::string* from) {
  if (v != 0 && (*limit == 0 || v < *limit)) {
    *limit = v;
    *from = source;
  }
}

// The directories from `dir` up to its hierarchy's root (`rel` is dir's part below the root).
std::vector<std::string> PathToRoot(const std::string& dir, const std::string& rel) {
  std::vector<std::string> out;
  const std::string root = dir.substr(0, dir.size() - rel.size());
  std::string cur = rel;
  while (!cur.empty() && cur != "/") {
    out.push_back(root + cur);
    cur = cur.substr(0, cur.rfind('/'));
  }
  out.push_back(root);
  return out;
}

}  // namespace

Result<EffectiveLimits> RunCgroup::ReadEffectiveLimits() const {
  if (!valid()) return Status::FailedPrecondition("cgroup: no run cgroup to read back");
  EffectiveLimits e;
  const bool v2 = version_ == Version::kV2;
  // One control file on every level of one controller's hierarchy; a missing file above the run
  // is simply no limit there (the v2 root has none), a missing or bad one on the run itself is
  // an error.
  auto walk = [&](const char* controller, const char* file, uint64_t* limit,
                  std::string* from) -> Status {
    const std::string dir = DirOf(controller);
    if (dir.empty()) return Status::FailedPrecondition(std::string("cgroup: no ") + controller);
    for (const std::string& level : PathToRoot(dir, rel_)) {
      const std::string path = level + "/" + file;
      std::string text;
      if (int err = fs_->ReadFile(path, &text); err != 0) {
        if (level == dir) return Status::Errno("read", path, err);
        continue;
      }
      std::optional<uint64_t> v = ParseLimit(text);
      if (!v) return Status::DataLoss("cgroup: " + path + " holds \"" + text + "\"");
      Stricter(*v, path, limit, from);
    }
    return Status::Ok();
  };
  SAFEX_RETURN_IF_ERROR(walk("memory", v2 ? "memory.max" : "memory.limit_in_bytes", &e.memory_bytes,
                             &e.memory_source));
  SAFEX_RETURN_IF_ERROR(walk("pids", "pids.max", &e.pids_max, &e.pids_source));
  SAFEX_RETURN_IF_ERROR(ReadCpuQuota(&e));
  return e;
}

// The CPU quota: v2 cpu.max "QUOTA PERIOD" (or "max PERIOD"), v1 cpu.cfs_quota_us over
// cpu.cfs_period_us; in thousandths of a CPU, the strictest on the path to the root.
Status RunCgroup::ReadCpuQuota(EffectiveLimits* e) const {
  const std::string dir = DirOf("cpu");
  if (dir.empty()) return Status::FailedPrecondition("cgroup: no cpu controller");
  const bool v2 = version_ == Version::kV2;
  for (const std::string& level : PathToRoot(dir, rel_)) {
    std::string quota_text, period_text;
    const std::string quota_path = level + (v2 ? "/cpu.max" : "/cpu.cfs_quota_us");
    if (int err = fs_->ReadFile(quota_path, &quota_text); err != 0) {
      if (level == dir) return Status::Errno("read", quota_path, err);
      continue;
    }
    if (v2) {
      const size_t space = quota_text.find(' ');
      if (space == std::string::npos)
        return Status::DataLoss("cgroup: " + quota_path + " malformed");
      period_text = quota_text.substr(space + 1);
      quota_text.resize(space);
    } else if (int err = fs_->ReadFile(level + "/cpu.cfs_period_us", &period_text); err != 0) {
      return Status::Errno("read", level + "/cpu.cfs_period_us", err);
    }
    std::optional<uint64_t> quota = ParseLimit(quota_text), period = ParseLimit(period_text);
    if (!quota || !period) return Status::DataLoss("cgroup: " + quota_path + " malformed");
    if (*quota == 0 || *period == 0) continue;  // unlimited here
    Stricter(*quota * 1000 / *period, quota_path, &e->cpu_millis, &e->cpu_source);
  }
  return Status::Ok();
}

std::vector<std::vector<std::string>> RunCgroup::MemberCommandLines() const {
  std::vector<std::vector<std::string>> out;
  Result<std::vector<pid_t>> procs = Procs();
  if (!procs.ok()) return out;
  for (pid_t pid : *procs) {
    UniqueFd fd(open(("/proc/" + std::to_string(pid) + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) continue;
    std::string cmdline;
    char buf[4096];
    for (ssize_t n; cmdline.size() < 64 * 1024 && (n = read(fd.get(), buf, sizeof buf)) > 0;) {
      cmdline.append(buf, static_cast<size_t>(n));
    }
    std::vector<std::string> args;
    for (size_t at = 0; at < cmdline.size();) {
      const size_t end = std::min(cmdline.find('\0', at), cmdline.size());
      args.push_back(cmdline.substr(at, end - at));
      at = end + 1;
    }
    if (!args.empty()) out.push_back(std::move(args));
  }
  return out;
}

void CompareLimits(const Limits& intended, const RunCgroup& cg, Enforcement* e) {
  Result<EffectiveLimits> seen = cg.ReadEffectiveLimits();
  if (!seen.ok()) {
    // Unreadable is not shown to hold: it differs (and so refuses the run).
    e->Compare("cgroup", "readable limits", "", "host kernel: " + seen.status().message());
    return;
  }
  auto text = [](uint64_t v) { return v == 0 ? std::string("unlimited") : std::to_string(v); };
  auto source = [](const std::string& file) {
    return "host kernel: " +
           (file.empty() ? std::string("no limit on the path to the root") : file);
  };
  e->Compare("cgroup.memory_bytes", text(intended.memory_bytes), text(seen->memory_bytes),
             source(seen->memory_source));
  e->Compare("cgroup.pids_max", text(intended.pids_max), text(seen->pids_max),
             source(seen->pids_source));
  e->Compare("cgroup.cpu_millis", text(uint64_t{intended.cpus} * 1000), text(seen->cpu_millis),
             source(seen->cpu_source));
}

}  // namespace safex::drivers::cgroup
