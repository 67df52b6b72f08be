#include "tests/support/leak_check.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common/persistent_state.h"
#include "common/proc_stat.h"
#include "common/sha256.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"

namespace safex::testing {
namespace {

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReadSmall(const std::string& path, size_t cap = 4096) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return "";
  std::string out(cap, '\0');
  ssize_t n = read(fd.get(), out.data(), cap);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

std::string Readlink(const std::string& path) {
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
  if (n < 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Basename(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

struct ProcInfo {
  pid_t ppid = 0;
  char state = '?';
  std::string comm;
  std::string exe;
  std::string cmdline;
};

std::map<pid_t, ProcInfo> Processes() {
  std::map<pid_t, ProcInfo> out;
  for (const std::string& name : ListDir("/proc")) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    pid_t pid = std::stoi(name);
    std::optional<ProcStat> stat = ReadProcStat(pid);
    if (!stat) continue;  // gone meanwhile
    ProcInfo p;
    p.comm = stat->comm;
    p.state = stat->state;
    p.ppid = stat->ppid;
    p.exe = Readlink("/proc/" + name + "/exe");
    std::string cmd = ReadSmall("/proc/" + name + "/cmdline", 512);
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
    p.cmdline = cmd.substr(0, 160);
    out[pid] = p;
  }
  return out;
}

void AddProcesses(std::set<std::string>* items) {
  std::map<pid_t, ProcInfo> procs = Processes();
  pid_t self = getpid();
  for (const auto& [pid, p] : procs) {
    if (pid == self) continue;
    bool descendant = false;
    pid_t cur = p.ppid;
    for (int depth = 0; cur > 1 && depth < 64; ++depth) {
      if (cur == self) {
        descendant = true;
        break;
      }
      auto it = procs.find(cur);
      if (it == procs.end()) break;
      cur = it->second.ppid;
    }
    std::string exe = Basename(p.exe);
    bool runsc = exe.rfind("runsc", 0) == 0 || p.comm.rfind("runsc", 0) == 0 ||
                 Basename(p.cmdline.substr(0, p.cmdline.find(' '))).rfind("runsc", 0) == 0;
    bool qemu = exe.rfind("qemu-system-", 0) == 0 || p.comm.rfind("qemu-system", 0) == 0;
    if (!runsc && !qemu && !descendant) continue;
    std::string kind = runsc ? "runsc" : qemu ? "qemu" : "child";
    items->insert("process: " + std::to_string(pid) + " [" + kind + "] state=" + p.state + " " +
                  (p.cmdline.empty() ? "(" + p.comm + ")" : p.cmdline));
  }
}

void AddCgroupTree(const std::string& dir, std::set<std::string>* items, int depth) {
  if (depth > 8) return;
  for (const std::string& n : ListDir(dir)) {
    std::string sub = dir + "/" + n;
    struct stat st;
    if (lstat(sub.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    items->insert("cgroup: " + sub);
    AddCgroupTree(sub, items, depth + 1);
  }
}

void AddCgroups(const LeakCheckOptions& o, std::set<std::string>* items) {
  std::vector<std::string> hierarchies;
  if (access((o.cgroup_root + "/cgroup.controllers").c_str(), F_OK) == 0) {
    hierarchies.push_back(o.cgroup_root);
  } else {
    for (const std::string& n : ListDir(o.cgroup_root)) {
      std::string h = o.cgroup_root + "/" + n;
      struct stat st;
      if (lstat(h.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;  // skip cpu -> cpu,cpuacct
      if (access((h + "/cgroup.procs").c_str(), F_OK) == 0) hierarchies.push_back(h);
    }
  }
  for (const std::string& h : hierarchies) {
    for (const std::string& parent : o.cgroup_parents) {
      std::string p = h + "/" + parent;
      if (IsDir(p)) AddCgroupTree(p, items, 0);
    }
  }
}

void AddNetns(std::set<std::string>* items) {
  for (const char* dir : {"/run/netns", "/var/run/netns"}) {
    for (const std::string& n : ListDir(dir))
      items->insert(std::string("netns pin: ") + dir + "/" + n);
  }
  std::set<std::string> inodes;
  for (const std::string& name : ListDir("/proc")) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::string ns = Readlink("/proc/" + name + "/ns/net");
    if (!ns.empty()) inodes.insert(ns);
  }
  for (const std::string& ns : inodes) items->insert("netns: " + ns);
}

void AddLinks(std::set<std::string>* items) {
  for (const std::string& n : ListDir("/sys/devices/virtual/net")) items->insert("link: " + n);
}

void AddNftTables(std::set<std::string>* items) {
  if (access("/usr/sbin/nft", X_OK) != 0) return;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return;
  UniqueFd r(p[0]), w(p[1]);
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnOptions so;
  so.argv = {"/usr/sbin/nft", "list", "tables"};
  so.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  so.fds = {{0, devnull.get()}, {1, w.get()}, {2, devnull.get()}};
  auto child = Subprocess::Spawn(so);
  if (!child.ok()) return;
  w.Reset();
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(r.get(), buf, sizeof buf)) > 0 && out.size() < (1 << 20)) out.append(buf, n);
  child->Wait(Subprocess::Clock::now() + std::chrono::seconds(10)).ok();
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    // "table inet safex_ab12"
    std::istringstream words(line);
    std::string t, family, name;
    words >> t >> family >> name;
    if (t == "table" && name.rfind("safex", 0) == 0) items->insert("nft: " + family + " " + name);
  }
}

// Entries of `dir` (depth <= 2) whose name contains `needle`.
void FindNamed(const std::string& dir, const std::string& needle, int depth,
               std::vector<std::string>* out) {
  for (const std::string& n : ListDir(dir)) {
    std::string p = dir + "/" + n;
    if (n.find(needle) != std::string::npos) {
      out->push_back(p);
      continue;
    }
    struct stat st;
    if (depth > 0 && lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      FindNamed(p, needle, depth - 1, out);
    }
  }
}

void AddMounts(const LeakCheckOptions& o, std::set<std::string>* items) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mountpoint options ... - fstype source superoptions
    std::istringstream words(line);
    std::string id, parent, dev, root, point;
    words >> id >> parent >> dev >> root >> point;
    size_t dash = line.find(" - ");
    std::string tail = dash == std::string::npos ? "" : line.substr(dash + 3);
    bool hit = line.find("safex") != std::string::npos || point.rfind(o.state_root, 0) == 0 ||
               line.find("runsc") != std::string::npos;
    if (hit) items->insert("mount: " + point + " (" + tail.substr(0, tail.find(' ')) + ")");
  }
}

void AddState(const LeakCheckOptions& o, std::set<std::string>* items) {
  for (const std::string& n : ListDir(o.state_root)) {
    // What the product keeps on purpose (common/persistent_state.h) is not a leak; what single
    // runs put inside a kept directory is.
    const safex::PersistentEntry* kept = nullptr;
    for (const auto& e : safex::kStateRootPersistent) {
      if (e.name == n) kept = &e;
    }
    if (kept == nullptr) {
      items->insert("state: " + o.state_root + "/" + n);
    } else if (kept->children_are_per_run) {
      for (const std::string& c : ListDir(o.state_root + "/" + n)) {
        // The daemon's request directory is kept too; the requests in it are per run.
        if (n == "private" && c == "requests") {
          for (const std::string& r : ListDir(o.state_root + "/private/requests")) {
            items->insert("state: " + o.state_root + "/private/requests/" + r);
          }
          continue;
        }
        items->insert("state: " + o.state_root + "/" + n + "/" + c);
      }
    }
  }
  for (const std::string& n : ListDir("/run/runsc")) items->insert("state: /run/runsc/" + n);
  for (const std::string& n : ListDir("/var/run/runsc"))
    items->insert("state: /var/run/runsc/" + n);
  for (const std::string& n : ListDir("/tmp")) {
    if (n.rfind("safex-", 0) == 0) items->insert("tmp: /tmp/" + n);
  }
  // Other components' state directories next to the state root (e.g. /run/safex-net-...).
  for (const std::string& n : ListDir("/run")) {
    if (n.rfind("safex-", 0) == 0) items->insert("state: /run/" + n);
  }
}

}  // namespace

LeakSnapshot LeakSnapshot::Take(const LeakCheckOptions& options) {
  LeakSnapshot s;
  AddProcesses(&s.items);
  AddCgroups(options, &s.items);
  AddNetns(&s.items);
  AddLinks(&s.items);
  AddNftTables(&s.items);
  AddMounts(options, &s.items);
  AddState(options, &s.items);
  return s;
}

std::vector<std::string> Diff(const LeakSnapshot& before, const LeakSnapshot& after) {
  std::vector<std::string> out;
  std::set_difference(after.items.begin(), after.items.end(), before.items.begin(),
                      before.items.end(), std::back_inserter(out));
  return out;
}

std::vector<std::string> WaitForNoLeaks(const LeakSnapshot& before,
                                        std::chrono::milliseconds settle,
                                        const LeakCheckOptions& options) {
  auto until = std::chrono::steady_clock::now() + settle;
  for (;;) {
    std::vector<std::string> d = Diff(before, LeakSnapshot::Take(options));
    if (d.empty() || std::chrono::steady_clock::now() >= until) return d;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::vector<std::string> ResourcesNamingRun(const std::string& run_id,
                                            const LeakCheckOptions& options, bool check_nft) {
  std::vector<std::string> out;
  if (run_id.empty()) return out;
  std::vector<std::string> found;
  for (const std::string& root : {options.state_root, std::string("/run/safex"),
                                  std::string("/var/lib/safex/microvm/runs")}) {
    FindNamed(root, run_id, 2, &found);
  }
  for (const std::string& f : found) out.push_back("state: " + f);
  std::set<std::string> cgroups;
  AddCgroups(options, &cgroups);
  for (const std::string& c : cgroups) {
    if (c.find(run_id) != std::string::npos) out.push_back(c);
  }
  for (const auto& [pid, p] : Processes()) {
    if (pid != getpid() && p.cmdline.find(run_id) != std::string::npos) {
      out.push_back("process: " + std::to_string(pid) + " state=" + p.state + " " + p.cmdline);
    }
  }
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mounts, line)) {
    if (line.find(run_id) != std::string::npos) out.push_back("mount: " + line.substr(0, 200));
  }
  std::string short_id = Sha256Hex(run_id).substr(0, 12);
  for (const char* dir : {"/run/netns", "/var/run/netns"}) {
    for (const std::string& n : ListDir(dir)) {
      if (n.find(run_id) != std::string::npos)
        out.push_back(std::string("netns pin: ") + dir + "/" + n);
    }
  }
  for (const std::string& n : ListDir("/sys/devices/virtual/net")) {
    if (n == "sx" + short_id) out.push_back("link: " + n);
  }
  if (check_nft) {
    std::set<std::string> tables;
    AddNftTables(&tables);
    for (const std::string& t : tables) {
      if (t.find("safex_" + short_id) != std::string::npos) out.push_back(t);
    }
  }
  return out;
}

std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "  " + l + "\n";
  return out;
}

}  // namespace safex::testing
