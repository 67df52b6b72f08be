#include "drivers/cgroup/cgroup.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <utility>

namespace safex::drivers::cgroup {
namespace {

constexpr uint64_t kCpuPeriodUs = 100000;

bool ValidName(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 200) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

std::vector<std::string> SplitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(sep, pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\n' && s[j] != '\t') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

bool ParseU64(const std::string& text, uint64_t* out) {
  std::vector<std::string> w = Words(text);
  if (w.size() != 1) return false;
  if (w[0] == "max") {
    *out = UINT64_MAX;
    return true;
  }
  auto [p, ec] = std::from_chars(w[0].data(), w[0].data() + w[0].size(), *out);
  return ec == std::errc() && p == w[0].data() + w[0].size();
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Status FsError(const std::string& op, const std::string& path, int err) {
  return Status::Errno(op, path, err);
}

}  // namespace

const char* VersionName(Version v) { return v == Version::kV1 ? "v1" : "v2"; }

Result<CgroupHost> CgroupHost::Detect(const std::string& root_in, CgroupFs* fs) {
  CgroupHost h;
  h.root_ = root_in;
  while (h.root_.size() > 1 && h.root_.back() == '/') h.root_.pop_back();
  h.fs_ = fs != nullptr ? fs : &HostFs();

  std::string controllers;
  if (h.fs_->ReadFile(h.root_ + "/cgroup.controllers", &controllers) == 0) {
    h.version_ = Version::kV2;
    h.v2_controllers_ = Words(controllers);
    return h;
  }

  h.version_ = Version::kV1;
  DIR* d = opendir(h.root_.c_str());
  if (d == nullptr)
    return Status::Unavailable("cgroups: cannot open " + h.root_ + ": " +
                               std::string(strerror(errno)));
  // Several names may reach one hierarchy (e.g. cpu -> cpu,cpuacct): merge them by inode.
  std::map<std::pair<dev_t, ino_t>, V1Hierarchy> found;
  std::map<std::pair<dev_t, ino_t>, bool> found_real_dir;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string dir = h.root_ + "/" + name;
    struct stat st, lst;
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (!h.fs_->Exists(dir + "/tasks") || !h.fs_->Exists(dir + "/cgroup.procs")) continue;
    bool is_link = lstat(dir.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
    auto key = std::make_pair(st.st_dev, st.st_ino);
    V1Hierarchy& hier = found[key];
    if (hier.dir.empty() || (!is_link && !found_real_dir[key])) {
      hier.dir = dir;
      found_real_dir[key] = !is_link;
    }
    for (const std::string& c : SplitOn(name, ',')) {
      if (!Contains(hier.controllers, c)) hier.controllers.push_back(c);
    }
  }
  closedir(d);
  for (auto& [key, hier] : found) {
    std::sort(hier.controllers.begin(), hier.controllers.end());
    h.v1_.push_back(std::move(hier));
  }
  std::sort(h.v1_.begin(), h.v1_.end(),
            [](const V1Hierarchy& a, const V1Hierarchy& b) { return a.dir < b.dir; });
  if (h.v1_.empty()) {
    return Status::Unavailable("cgroups: neither a v2 tree (" + h.root_ +
                               "/cgroup.controllers) nor v1 hierarchies under " + h.root_);
  }
  return h;
}

std::vector<std::string> CgroupHost::HierarchyDirs() const {
  if (version_ == Version::kV2) return {root_};
  std::vector<std::string> out;
  for (const V1Hierarchy& h : v1_) out.push_back(h.dir);
  return out;
}

bool CgroupHost::V1Has(const std::string& controller) const {
  for (const V1Hierarchy& h : v1_) {
    if (Contains(h.controllers, controller)) return true;
  }
  return false;
}

Status CgroupHost::CheckUsable(const std::string& parent) const {
  std::vector<std::string> missing;
  if (version_ == Version::kV2) {
    for (const char* c : {"memory", "pids", "cpu"}) {
      if (!Contains(v2_controllers_, c)) missing.push_back(c);
    }
  } else {
    for (const char* c : {"memory", "pids", "cpu", "cpuacct"}) {
      if (!V1Has(c)) missing.push_back(c);
    }
  }
  if (!missing.empty()) {
    std::string m;
    for (const std::string& c : missing) m += (m.empty() ? "" : ", ") + c;
    return Status::Unavailable(std::string("cgroups ") + VersionName(version_) + " under " + root_ +
                               ": controller(s) not available: " + m);
  }
  // The real test of "writable": create and remove a throwaway run cgroup with every limit set.
  std::string probe =
      "probe-" + std::to_string(getpid()) + "-" +
      std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()) % 100000);
  Limits l;
  l.memory_bytes = 64u << 20;
  l.pids_max = 64;
  l.cpus = 1;
  auto rc = CreateRun(parent, probe, l);
  if (!rc.ok()) {
    return Status::Unavailable(std::string("cgroups ") + VersionName(version_) +
                               " not writable: " + rc.status().message());
  }
  Status st = rc->Destroy();
  if (!st.ok())
    return Status::Unavailable("cgroups: cannot remove a probe cgroup: " + st.message());
  return Status::Ok();
}

Status CgroupHost::EnsureParent(const std::string& parent) const {
  std::vector<std::string> parts = SplitOn(parent, '/');
  if (parts.empty() || parent[0] == '/') {
    return Status::InvalidArgument("cgroup parent must be a relative path: '" + parent + "'");
  }
  for (const std::string& p : parts) {
    if (!ValidName(p)) return Status::InvalidArgument("bad cgroup parent component: '" + p + "'");
  }
  if (version_ == Version::kV2) {
    // Each level must delegate memory, pids and cpu to the next one, down to the run's cgroup.
    std::string cur = root_;
    for (size_t i = 0; i <= parts.size(); ++i) {
      std::string enabled;
      if (int err = fs_->ReadFile(cur + "/cgroup.subtree_control", &enabled); err != 0) {
        return FsError("read", cur + "/cgroup.subtree_control", err);
      }
      std::vector<std::string> have = Words(enabled);
      std::string want;
      for (const char* c : {"memory", "pids", "cpu"}) {
        if (!Contains(have, c)) want += std::string(want.empty() ? "+" : " +") + c;
      }
      if (!want.empty()) {
        if (int err = fs_->WriteFile(cur + "/cgroup.subtree_control", want); err != 0) {
          return FsError("write " + want, cur + "/cgroup.subtree_control", err);
        }
      }
      if (i == parts.size()) break;
      cur += "/" + parts[i];
      if (int err = fs_->MakeDir(cur); err != 0 && err != EEXIST) return FsError("mkdir", cur, err);
    }
    return Status::Ok();
  }
  for (const V1Hierarchy& h : v1_) {
    std::string cur = h.dir;
    bool cpuset = Contains(h.controllers, "cpuset");
    for (const std::string& p : parts) {
      std::string up = cur;
      cur += "/" + p;
      if (int err = fs_->MakeDir(cur); err != 0 && err != EEXIST) return FsError("mkdir", cur, err);
      if (cpuset) {
        // A new v1 cpuset starts with no CPUs and no memory nodes: nothing could run in it.
        for (const char* f : {"/cpuset.cpus", "/cpuset.mems"}) {
          std::string mine;
          if (fs_->ReadFile(cur + f, &mine) == 0 && Words(mine).empty()) {
            std::string from_parent;
            if (int err = fs_->ReadFile(up + f, &from_parent); err != 0) {
              return FsError("read", up + f, err);
            }
            std::vector<std::string> w = Words(from_parent);
            if (!w.empty()) {
              if (int err = fs_->WriteFile(cur + f, w[0]); err != 0)
                return FsError("write", cur + f, err);
            }
          }
        }
      }
    }
  }
  return Status::Ok();
}

Result<RunCgroup> CgroupHost::CreateRun(const std::string& parent, const std::string& name,
                                        const Limits& limits) const {
  if (!ValidName(name)) return Status::InvalidArgument("bad cgroup name: '" + name + "'");
  SAFEX_RETURN_IF_ERROR(EnsureParent(parent));

  RunCgroup rc;
  rc.version_ = version_;
  rc.fs_ = fs_;
  rc.rel_ = "/" + parent + "/" + name;

  auto make = [&](const std::string& dir) -> Status {
    int err = fs_->MakeDir(dir);
    if (err == EEXIST) {
      return Status::FailedPrecondition("cgroup " + dir +
                                        " already exists (left over by an earlier run?)");
    }
    if (err != 0) return FsError("mkdir", dir, err);
    rc.dirs_.push_back(dir);
    return Status::Ok();
  };
  if (version_ == Version::kV2) {
    SAFEX_RETURN_IF_ERROR(make(root_ + rc.rel_));
    SAFEX_RETURN_IF_ERROR(WriteV2Limits(rc.dirs_.back(), limits));
    return rc;
  }

  for (const V1Hierarchy& h : v1_) {
    SAFEX_RETURN_IF_ERROR(make(h.dir + rc.rel_));
    for (const std::string& c : h.controllers)
      rc.by_controller_.emplace_back(c, rc.dirs_.size() - 1);
    const std::string& dir = rc.dirs_.back();
    if (Contains(h.controllers, "cpuset")) {
      for (const char* f : {"cpuset.cpus", "cpuset.mems"}) {
        std::string from_parent;
        if (int err = fs_->ReadFile(h.dir + "/" + parent + "/" + f, &from_parent); err != 0) {
          return FsError("read", h.dir + "/" + parent + "/" + f, err);
        }
        std::vector<std::string> w = Words(from_parent);
        if (!w.empty()) SAFEX_RETURN_IF_ERROR(Write(dir, f, w[0]));
      }
    }
    SAFEX_RETURN_IF_ERROR(WriteV1Limits(h.controllers, dir, limits));
  }
  return rc;
}

Status CgroupHost::LimitParent(const std::string& parent, const Limits& limits) const {
  SAFEX_RETURN_IF_ERROR(EnsureParent(parent));
  if (version_ == Version::kV2) return WriteV2Limits(root_ + "/" + parent, limits);
  for (const V1Hierarchy& h : v1_) {
    SAFEX_RETURN_IF_ERROR(WriteV1Limits(h.controllers, h.dir + "/" + parent, limits));
  }
  return Status::Ok();
}

Status CgroupHost::Write(const std::string& dir, const char* file, const std::string& value) const {
  if (int err = fs_->WriteFile(dir + "/" + file, value); err != 0) {
    return FsError("write " + value, dir + "/" + file, err);
  }
  return Status::Ok();
}

Status CgroupHost::WriteV2Limits(const std::string& dir, const Limits& limits) const {
  if (limits.memory_bytes > 0) {
    SAFEX_RETURN_IF_ERROR(Write(dir, "memory.max", std::to_string(limits.memory_bytes)));
    // Swapping would let a run hold more than its limit at the host's expense.
    if (fs_->Exists(dir + "/memory.swap.max"))
      SAFEX_RETURN_IF_ERROR(Write(dir, "memory.swap.max", "0"));
  }
  if (limits.pids_max > 0)
    SAFEX_RETURN_IF_ERROR(Write(dir, "pids.max", std::to_string(limits.pids_max)));
  if (limits.cpus > 0) {
    SAFEX_RETURN_IF_ERROR(
        Write(dir, "cpu.max",
              std::to_string(limits.cpus * kCpuPeriodUs) + " " + std::to_string(kCpuPeriodUs)));
  }
  return Status::Ok();
}

Status CgroupHost::WriteV1Limits(const std::vector<std::string>& controllers,
                                 const std::string& dir, const Limits& limits) const {
  if (Contains(controllers, "memory") && limits.memory_bytes > 0) {
    SAFEX_RETURN_IF_ERROR(Write(dir, "memory.limit_in_bytes", std::to_string(limits.memory_bytes)));
    // memsw (memory + swap) exists only with swap accounting; it must be >= the memory limit.
    if (fs_->Exists(dir + "/memory.memsw.limit_in_bytes")) {
      SAFEX_RETURN_IF_ERROR(
          Write(dir, "memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes)));
    }
  }
  if (Contains(controllers, "pids") && limits.pids_max > 0) {
    SAFEX_RETURN_IF_ERROR(Write(dir, "pids.max", std::to_string(limits.pids_max)));
  }
  if (Contains(controllers, "cpu") && limits.cpus > 0) {
    SAFEX_RETURN_IF_ERROR(Write(dir, "cpu.cfs_period_us", std::to_string(kCpuPeriodUs)));
    SAFEX_RETURN_IF_ERROR(
        Write(dir, "cpu.cfs_quota_us", std::to_string(limits.cpus * kCpuPeriodUs)));
  }
  return Status::Ok();
}

Result<RunCgroup> CgroupHost::Adopt(const std::string& parent, const std::string& name) const {
  if (!ValidName(name)) return Status::InvalidArgument("bad cgroup name: '" + name + "'");
  for (const std::string& p : SplitOn(parent, '/')) {
    if (!ValidName(p)) return Status::InvalidArgument("bad cgroup parent component: '" + p + "'");
  }
  RunCgroup rc;
  rc.version_ = version_;
  rc.fs_ = fs_;
  rc.rel_ = "/" + parent + "/" + name;
  if (version_ == Version::kV2) {
    if (fs_->Exists(root_ + rc.rel_)) rc.dirs_.push_back(root_ + rc.rel_);
  } else {
    for (const V1Hierarchy& h : v1_) {
      if (!fs_->Exists(h.dir + rc.rel_)) continue;
      rc.dirs_.push_back(h.dir + rc.rel_);
      for (const std::string& c : h.controllers)
        rc.by_controller_.emplace_back(c, rc.dirs_.size() - 1);
    }
  }
  if (rc.dirs_.empty()) return Status::NotFound("no cgroup " + rc.rel_);
  return rc;
}

RunCgroup::~RunCgroup() {
  if (valid()) Destroy().ok();  // best effort: a destructor cannot report; callers Destroy() first
}

RunCgroup::RunCgroup(RunCgroup&& o) noexcept
    : version_(o.version_),
      fs_(o.fs_),
      rel_(std::move(o.rel_)),
      dirs_(std::exchange(o.dirs_, {})),
      by_controller_(std::exchange(o.by_controller_, {})) {}

RunCgroup& RunCgroup::operator=(RunCgroup&& o) noexcept {
  if (this != &o) {
    if (valid()) Destroy().ok();
    version_ = o.version_;
    fs_ = o.fs_;
    rel_ = std::move(o.rel_);
    dirs_ = std::exchange(o.dirs_, {});
    by_controller_ = std::exchange(o.by_controller_, {});
  }
  return *this;
}

std::vector<std::string> RunCgroup::LimitDirs() const {
  if (version_ == Version::kV2) return dirs_;
  std::vector<std::string> out;
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"}) {
    const std::string d = DirOf(c);
    if (!d.empty() && std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

std::string RunCgroup::DirOf(const std::string& controller) const {
  if (dirs_.empty()) return "";
  if (version_ == Version::kV2) return dirs_.front();
  for (const auto& [c, i] : by_controller_) {
    if (c == controller) return dirs_[i];
  }
  return "";
}

Result<std::string> RunCgroup::Read(const std::string& dir, const char* file) const {
  if (dir.empty())
    return Status::FailedPrecondition(std::string("cgroup: no hierarchy for ") + file);
  std::string out;
  if (int err = fs_->ReadFile(dir + "/" + file, &out); err != 0)
    return FsError("read", dir + "/" + file, err);
  return out;
}

Result<uint64_t> RunCgroup::ReadKeyed(const std::string& dir, const char* file,
                                      const char* key) const {
  SAFEX_ASSIGN_OR_RETURN(std::string text, Read(dir, file));
  for (const std::string& line : SplitOn(text, '\n')) {
    std::vector<std::string> w = Words(line);
    uint64_t v = 0;
    if (w.size() == 2 && w[0] == key && ParseU64(w[1], &v)) return v;
  }
  return Status::NotFound(std::string("cgroup: no '") + key + "' in " + dir + "/" + file);
}

Result<uint64_t> RunCgroup::CpuUsageNs() const {
  if (version_ == Version::kV2) {
    SAFEX_ASSIGN_OR_RETURN(uint64_t usec, ReadKeyed(DirOf("cpu"), "cpu.stat", "usage_usec"));
    return usec * 1000;
  }
  std::string dir = DirOf("cpuacct");
  SAFEX_ASSIGN_OR_RETURN(std::string text, Read(dir, "cpuacct.usage"));
  uint64_t ns = 0;
  if (!ParseU64(text, &ns)) return Status::Internal("cgroup: bad cpuacct.usage in " + dir);
  return ns;
}

Result<uint64_t> RunCgroup::PeakMemoryBytes() const {
  std::string dir = DirOf("memory");
  const char* file = "memory.max_usage_in_bytes";
  if (version_ == Version::kV2) {
    file = fs_->Exists(dir + "/memory.peak") ? "memory.peak" : "memory.current";
  }
  SAFEX_ASSIGN_OR_RETURN(std::string text, Read(dir, file));
  uint64_t v = 0;
  if (!ParseU64(text, &v)) return Status::Internal("cgroup: bad " + dir + "/" + file);
  return v;
}

Result<std::string> RunCgroup::CpusetCpus() const {
  const std::string dir = DirOf("cpuset");
  if (!fs_->Exists(dir + "/cpuset.cpus")) {
    return Status::FailedPrecondition("cgroup: no cpuset controller for " + rel_);
  }
  SAFEX_ASSIGN_OR_RETURN(std::string text, Read(dir, "cpuset.cpus"));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

Status RunCgroup::SetCpusetCpus(const std::string& list) {
  const std::string file = DirOf("cpuset") + "/cpuset.cpus";
  if (!fs_->Exists(file)) return Status::FailedPrecondition("cgroup: no cpuset controller");
  if (int err = fs_->WriteFile(file, list); err != 0) return Status::Errno("write", file, err);
  return Status::Ok();
}

Status RunCgroup::SetCpuPriority(bool low) {
  const bool v2 = version_ == Version::kV2;
  const std::string file = DirOf("cpu") + (v2 ? "/cpu.weight" : "/cpu.shares");
  const char* value = v2 ? (low ? "1" : "100") : (low ? "2" : "1024");
  if (int err = fs_->WriteFile(file, value); err != 0) return Status::Errno("write", file, err);
  return Status::Ok();
}

Status RunCgroup::ResetPeakMemory() {
  if (version_ == Version::kV2) {
    return Status::FailedPrecondition("cgroup v2 has no reset of the memory high-water mark");
  }
  const std::string file = DirOf("memory") + "/memory.max_usage_in_bytes";
  if (int err = fs_->WriteFile(file, "0"); err != 0) return Status::Errno("write", file, err);
  return Status::Ok();
}

Result<uint64_t> RunCgroup::OomKills() const {
  if (version_ == Version::kV2) return ReadKeyed(DirOf("memory"), "memory.events", "oom_kill");
  return ReadKeyed(DirOf("memory"), "memory.oom_control", "oom_kill");
}

Result<uint64_t> RunCgroup::PidsLimitHits() const {
  return ReadKeyed(DirOf("pids"), "pids.events", "max");
}

Result<std::vector<pid_t>> RunCgroup::Procs() const {
  std::set<pid_t> all;
  for (const std::string& dir : dirs_) {
    std::string text;
    int err = fs_->ReadFile(dir + "/cgroup.procs", &text);
    if (err == ENOENT) continue;
    if (err != 0) return FsError("read", dir + "/cgroup.procs", err);
    for (const std::string& w : Words(text)) {
      pid_t p = 0;
      auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), p);
      if (ec == std::errc() && ptr == w.data() + w.size() && p > 0) all.insert(p);
    }
  }
  return std::vector<pid_t>(all.begin(), all.end());
}

Status RunCgroup::SetFrozen(bool frozen) {
  const bool v2 = version_ == Version::kV2;
  const std::string dir = DirOf("freezer");
  const std::string file = v2 ? dir + "/cgroup.freeze" : dir + "/freezer.state";
  if (dir.empty() || !fs_->Exists(file)) {
    return Status::FailedPrecondition("cgroup: no freezer for " + rel_);
  }
  const char* value = v2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED");
  if (int err = fs_->WriteFile(file, value); err != 0) return FsError("write", file, err);
  return Status::Ok();
}

Status RunCgroup::KillAll() {
  if (!valid()) return Status::Ok();
  // Best effort: a cgroup that cannot be thawed keeps its processes, and Destroy then reports it
  // busy rather than gone.
  SetFrozen(false).ok();
  if (version_ == Version::kV2 && fs_->Exists(dirs_.front() + "/cgroup.kill")) {
    if (int err = fs_->WriteFile(dirs_.front() + "/cgroup.kill", "1"); err != 0 && err != ENOENT) {
      return FsError("write 1", dirs_.front() + "/cgroup.kill", err);
    }
    return Status::Ok();
  }
  // No cgroup.kill: signal members one by one; new forks can appear meanwhile, so repeat.
  Status first;
  for (int round = 0; round < 5; ++round) {
    bool any = false;
    for (const std::string& dir : dirs_) {
      std::string procs_file = dir + "/cgroup.procs";
      std::string text;
      if (fs_->ReadFile(procs_file, &text) != 0) continue;
      for (const std::string& w : Words(text)) {
        pid_t p = 0;
        auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), p);
        if (ec != std::errc() || p <= 0) continue;
        any = true;
        if (int err = fs_->KillMember(p, procs_file); err != 0 && first.ok()) {
          first = FsError("kill", std::to_string(p), err);
        }
      }
    }
    if (!any) break;
  }
  return first;
}

Status RunCgroup::Destroy(std::chrono::milliseconds patience) {
  if (!valid()) return Status::Ok();
  auto deadline = std::chrono::steady_clock::now() + patience;
  Status first;
  std::vector<std::string> left;
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    const std::string& dir = *it;
    auto backoff = std::chrono::milliseconds(1);
    for (;;) {
      int err = fs_->RemoveDir(dir);
      if (err == 0 || err == ENOENT) break;
      bool can_retry = err == EBUSY && std::chrono::steady_clock::now() < deadline;
      if (!can_retry) {
        if (first.ok()) first = FsError("rmdir", dir, err);
        left.push_back(dir);
        break;
      }
      KillAll().ok();  // leftover processes keep the cgroup busy
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
    }
  }
  if (left.empty()) {
    dirs_.clear();
    by_controller_.clear();
  } else {
    std::reverse(left.begin(), left.end());
    // Keep what could not be removed so a later Destroy() can retry; indexes are rebuilt lazily
    // only for removal, so drop the controller map.
    dirs_ = std::move(left);
    by_controller_.clear();
  }
  return first;
}

}  // namespace safex::drivers::cgroup
