// A temporary directory laid out like a cgroup tree (v2, or a v1 hybrid as on this project's
// build machine), and a CgroupFs that plays the kernel's part on it: mkdir creates the control
// files of the controllers the parent delegates, rmdir fails with EBUSY while processes remain,
// cgroup.kill empties the cgroup. For unprivileged tests of code that makes cgroups
// (drivers/cgroup, and the backends' cgroup steps).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/fs_tree.h"
#include "drivers/cgroup/cgroup_fs.h"

namespace safex::drivers::cgroup {

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::trunc);
  out << data;
}

// Plays the kernel's part on a plain directory tree.
class FakeKernelFs : public HostCgroupFs {
 public:
  explicit FakeKernelFs(bool v2) : v2_(v2) {}

  int MakeDir(const std::string& path) override {
    ++mkdirs;
    if (int err = HostCgroupFs::MakeDir(path); err != 0) return err;
    std::string parent = path.substr(0, path.rfind('/'));
    std::vector<std::string> files = {"cgroup.procs"};
    if (v2_) {
      std::string delegated = ReadAll(parent + "/cgroup.subtree_control");
      WriteAll(path + "/cgroup.controllers", delegated);
      files.insert(files.end(),
                   {"cgroup.subtree_control", "cgroup.kill", "cgroup.events", "cgroup.freeze"});
      std::istringstream in(delegated);
      std::string c;
      while (in >> c) {
        if (c == "memory") {
          files.insert(files.end(), {"memory.max", "memory.swap.max", "memory.peak",
                                     "memory.current", "memory.events"});
          WriteAll(path + "/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
        }
        if (c == "pids") {
          files.insert(files.end(), {"pids.max", "pids.current", "pids.events"});
          WriteAll(path + "/pids.events", "max 0\n");
        }
        if (c == "cpu") {
          files.insert(files.end(), {"cpu.max", "cpu.stat", "cpu.weight"});
          WriteAll(path + "/cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n");
        }
      }
    } else {
      files.push_back("tasks");
      std::string hier = path.substr(0, path.find('/', root_len_ + 1));
      std::string name = hier.substr(hier.rfind('/') + 1);
      if (name == "memory") {
        files.insert(files.end(), {"memory.limit_in_bytes", "memory.max_usage_in_bytes",
                                   "memory.oom_control", "memory.memsw.limit_in_bytes"});
        WriteAll(path + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
      }
      if (name == "pids") {
        files.insert(files.end(), {"pids.max", "pids.events"});
        WriteAll(path + "/pids.events", "max 0\n");
      }
      if (name.find("cpu") != std::string::npos && name.find("cpuset") == std::string::npos) {
        files.insert(files.end(), {"cpu.cfs_period_us", "cpu.cfs_quota_us", "cpuacct.usage"});
        WriteAll(path + "/cpuacct.usage", "0\n");
      }
      if (name == "cpuset") files.insert(files.end(), {"cpuset.cpus", "cpuset.mems"});
      if (name == "freezer") files.push_back("freezer.state");
    }
    // The kernel's defaults: no limit until one is written.
    const std::map<std::string, std::string> defaults = {
        {"memory.max", "max\n"},      {"pids.max", "max\n"},
        {"cpu.max", "max 100000\n"},  {"memory.limit_in_bytes", "9223372036854771712\n"},
        {"cpu.cfs_quota_us", "-1\n"}, {"cpu.cfs_period_us", "100000\n"},
        {"freezer.state", "THAWED\n"}, {"cgroup.freeze", "0\n"}};
    for (const std::string& f : files) {
      if (access((path + "/" + f).c_str(), F_OK) != 0) {
        auto d = defaults.find(f);
        WriteAll(path + "/" + f, d == defaults.end() ? "" : d->second);
      }
    }
    return 0;
  }

  int RemoveDir(const std::string& path) override {
    ++rmdirs;
    if (!ReadAll(path + "/cgroup.procs").empty()) return EBUSY;
    // The kernel removes the control files with the directory.
    safex::RemoveTree(path).ok();
    return access(path.c_str(), F_OK) == 0 ? EIO : 0;
  }

  int WriteFile(const std::string& path, std::string_view data) override {
    if (access(path.c_str(), F_OK) != 0) return ENOENT;  // control files are never created
    writes[path] = std::string(data);
    ops.push_back("write " + path.substr(path.rfind('/') + 1) + " " + std::string(data));
    if (path.ends_with("/cgroup.kill") && data == "1") {
      WriteAll(path.substr(0, path.rfind('/')) + "/cgroup.procs", "");
      ++kills;
      return 0;
    }
    if (path.ends_with("/cgroup.subtree_control")) {
      // "+a +b": add to what is enabled, as the kernel does.
      std::set<std::string> on;
      std::istringstream cur(ReadAll(path));
      std::string w;
      while (cur >> w) on.insert(w);
      std::istringstream add{std::string(data)};
      while (add >> w) {
        if (w[0] == '+') on.insert(w.substr(1));
        if (w[0] == '-') on.erase(w.substr(1));
      }
      std::string out;
      for (const std::string& c : on) out += (out.empty() ? "" : " ") + c;
      WriteAll(path, out);
      return 0;
    }
    WriteAll(path, std::string(data));
    return 0;
  }

  int KillMember(pid_t pid, const std::string& procs_file) override {
    killed.push_back(pid);
    ops.push_back("kill " + std::to_string(pid));
    std::string procs = ReadAll(procs_file), out;
    std::istringstream in(procs);
    std::string w;
    while (in >> w) {
      if (w != std::to_string(pid)) out += w + "\n";
    }
    WriteAll(procs_file, out);
    return 0;
  }

  void set_root_len(size_t n) { root_len_ = n; }

  int mkdirs = 0, rmdirs = 0, kills = 0;
  std::map<std::string, std::string> writes;
  std::vector<pid_t> killed;
  std::vector<std::string> ops;  // "write FILE VALUE" and "kill PID", in order

 private:
  bool v2_;
  size_t root_len_ = 0;
};

class TempTree {
 public:
  TempTree() {
    char tmpl[] = "/tmp/sxtest-cg-XXXXXX";  // not /tmp/safex-*: see tests/support/temp_dir.h
    path_ = mkdtemp(tmpl);
  }
  ~TempTree() { safex::RemoveTree(path_).ok(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A v2 root as on a systemd host: controllers available, none delegated yet from the root.
inline void LayOutV2(const std::string& root) {
  WriteAll(root + "/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
  WriteAll(root + "/cgroup.subtree_control", "");
  WriteAll(root + "/cgroup.procs", "1\n");
}

// A v1 hybrid as on this project's build machine: cpu,cpuacct co-mounted (with the usual
// symlinks), memory, pids, cpuset (filled), freezer, and the v2 mount with no tasks file.
inline void LayOutV1Hybrid(const std::string& root) {
  for (const char* h : {"cpu,cpuacct", "memory", "pids", "cpuset", "freezer"}) {
    std::string d = root + "/" + h;
    mkdir(d.c_str(), 0755);
    WriteAll(d + "/cgroup.procs", "");
    WriteAll(d + "/tasks", "");
  }
  WriteAll(root + "/cpuset/cpuset.cpus", "0-3\n");
  WriteAll(root + "/cpuset/cpuset.mems", "0\n");
  (void)!symlink("cpu,cpuacct", (root + "/cpu").c_str());
  (void)!symlink("cpu,cpuacct", (root + "/cpuacct").c_str());
  mkdir((root + "/unified").c_str(), 0755);
  WriteAll(root + "/unified/cgroup.procs", "");
}

}  // namespace safex::drivers::cgroup
