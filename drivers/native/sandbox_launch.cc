#include "drivers/native/sandbox_launch.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/exec_prep.h"
#include "drivers/exec_candidates.h"
#include "drivers/native/sandbox_child.h"
#include "plan/verify.h"

namespace safex::drivers::native {
namespace {

constexpr char kHostname[] = "safex";

// A bind source, opened once and checked: the child mounts a clone of this very object (CloneTree),
// so what is mounted is what was checked here, even if the path is swapped for a symlink later.
// Symlinks on the way are followed here, once (/lib is one on merged-/usr hosts); where they end
// must not be a protected host path, nor a socket.
Result<UniqueFd> OpenBindSource(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!fd) return Status::Errno("open", "bind source " + path, errno);
  char real[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd.get());
  const ssize_t n = readlink(link.c_str(), real, sizeof real - 1);
  if (n <= 0) return Status::Errno("readlink", link, errno);
  const std::string resolved(real, static_cast<size_t>(n));
  for (const std::string& p : plan::ProtectedHostPaths()) {
    if (resolved == "/" ||
        (p != "/" && (plan::PathWithin(resolved, p) || plan::PathWithin(p, resolved)))) {
      return Status::PermissionDenied("native: bind source " + path + " resolves to " + resolved +
                                      ", a protected host path; refused");
    }
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Status::Errno("fstat", path, errno);
  if (S_ISSOCK(st.st_mode)) {
    return Status::PermissionDenied("native: bind source " + path + " is a socket; refused");
  }
  return fd;
}

// One of the run's own directories (input snapshot, output tmpfs), never through a symlink.
Result<UniqueFd> OpenOwnSource(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return Status::Errno("open", path, errno);
  return fd;
}

rlim_t CpuRlimitSeconds(uint64_t cpu_ns) {
  // A per-process backstop above the plan's total: the cgroup's accounting of every process of
  // the run, polled by the supervisor, stops the run first.
  return static_cast<rlim_t>(cpu_ns / 1000000000ull + 2);
}

// What the child reads: every string and array it uses lives here until clone3 has returned
// (the child has its own copy of this memory from then on).
struct Prepared {
  std::vector<UniqueFd> source_fds;
  std::vector<MountOp> ops;
  std::vector<std::string> argv, env, candidates;
  std::vector<char*> argv_c, env_c;
  std::vector<const char*> candidates_c;
  std::vector<ChildRlimit> rlimits;
  std::vector<sock_filter> seccomp;
  ChildSpec spec;
};

// A detached clone of exactly the object `fd` names (not recursive: what is mounted below it
// on the host is not part of it), for the child to attach in its own namespace.
Result<UniqueFd> CloneTree(const UniqueFd& fd, const std::string& what) {
  UniqueFd tree(static_cast<int>(
      syscall(SYS_open_tree, fd.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH)));
  if (!tree) return Status::Errno("open_tree(OPEN_TREE_CLONE)", what, errno);
  return tree;
}

Status OpenSources(const LaunchInputs& in, Prepared* p, std::vector<int>* tree_fds) {
  const plan::Plan& plan = *in.plan;
  tree_fds->assign(plan.mounts.size(), -1);
  for (size_t i = 0; i < plan.mounts.size(); ++i) {
    const plan::Mount& m = plan.mounts[i];
    if (m.kind == plan::MountKind::kTmpfs) continue;
    const std::string& src = i < in.mount_sources.size() ? in.mount_sources[i] : std::string();
    Result<UniqueFd> fd =
        m.kind == plan::MountKind::kBind ? OpenBindSource(src) : OpenOwnSource(src);
    if (!fd.ok()) return fd.status();
    SAFEX_ASSIGN_OR_RETURN(UniqueFd tree, CloneTree(*fd, src));
    (*tree_fds)[i] = tree.get();
    p->source_fds.push_back(std::move(tree));
  }
  return Status::Ok();
}

Status Prepare(const LaunchInputs& in, Prepared* p) {
  const plan::Plan& plan = *in.plan;
  MountScriptInput script;
  script.plan = &plan;
  script.root = in.root;
  SAFEX_RETURN_IF_ERROR(OpenSources(in, p, &script.source_fds));
  script.host_uid = in.host_id;
  script.host_gid = in.host_id;
  p->ops = BuildMountScript(script);

  p->argv = in.argv;
  std::string path = kDefaultExecPath;
  for (const auto& [k, v] : plan.env) {
    p->env.push_back(k + "=" + v);
    if (k == "PATH") path = v;
  }
  for (const std::string& s : p->argv) {
    if (s.find('\0') != std::string::npos) return Status::InvalidArgument("argv holds a NUL byte");
  }
  p->candidates = ExecCandidates(in.argv[0], path);
  p->argv_c = CStrings(p->argv);
  p->env_c = CStrings(p->env);
  for (const std::string& c : p->candidates) p->candidates_c.push_back(c.c_str());
  p->candidates_c.push_back(nullptr);
  const plan::Limits& l = plan.limits;
  p->rlimits = {{RLIMIT_CORE, 0},
                {RLIMIT_CPU, CpuRlimitSeconds(l.cpu_time_ns)},
                {RLIMIT_FSIZE, static_cast<rlim_t>(l.disk_bytes)},
                {RLIMIT_NOFILE, static_cast<rlim_t>(l.open_files)}};
  p->seccomp = in.seccomp;
  return Status::Ok();
}

void FillSpec(const LaunchInputs& in, int report_w, int channel_child, Prepared* p) {
  ChildSpec& s = p->spec;
  s.stdin_fd = in.stdin_fd;
  s.stdout_fd = in.stdout_fd;
  s.stderr_fd = in.stderr_fd;
  s.report_fd = report_w;
  s.channel_fd = channel_child;
  s.netns_fd = in.netns_fd;
  int highest =
      std::max({2, in.stdin_fd, in.stdout_fd, in.stderr_fd, report_w, channel_child, in.netns_fd});
  for (const UniqueFd& fd : p->source_fds) highest = std::max(highest, fd.get());
  s.high_base = highest + 1;
  s.ops = p->ops.data();
  s.nops = p->ops.size();
  s.root = in.root.c_str();
  s.hostname = kHostname;
  s.hostname_len = sizeof kHostname - 1;
  s.rlimits = p->rlimits.data();
  s.nrlimits = p->rlimits.size();
  s.uid = in.plan->process.uid;
  s.gid = in.plan->process.gid;
  s.landlock_rules = in.landlock.rules.data();
  s.nlandlock = in.landlock.rules.size();
  s.landlock_abi = in.landlock.abi;
  s.landlock_handled = in.landlock.handled;
  s.cwd = in.plan->process.cwd.c_str();
  s.seccomp.len = static_cast<unsigned short>(p->seccomp.size());
  s.seccomp.filter = p->seccomp.data();
  s.argv = p->argv_c.data();
  s.envp = p->env_c.data();
  s.candidates = p->candidates_c.data();
}

enum class Wait { kDone, kEof, kCancelled, kTimedOut };

// Reads exactly `n` bytes, polling until `deadline`; the cancel flag is checked every 50 ms.
Wait ReadFully(int fd, char* buf, size_t n, Sandbox::Clock::time_point deadline,
               const std::atomic<int>* cancel) {
  size_t got = 0;
  while (got < n) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed) != 0) return Wait::kCancelled;
    if (Sandbox::Clock::now() >= deadline) return Wait::kTimedOut;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return Wait::kEof;
    got += static_cast<size_t>(r);
  }
  return Wait::kDone;
}

Status WriteFile(const std::string& path, const std::string& text) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return Status::Errno("open", path, errno);
  if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return Status::Errno("write", path, errno);
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::pair<std::string, uint64_t>> ChildRlimitNames(const plan::Limits& l) {
  return {{"Max core file size", 0},
          {"Max cpu time", CpuRlimitSeconds(l.cpu_time_ns)},
          {"Max file size", l.disk_bytes},
          {"Max open files", l.open_files}};
}

Result<Sandbox> Sandbox::Start(const LaunchInputs& in) {
  Prepared p;
  SAFEX_RETURN_IF_ERROR(Prepare(in, &p));
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return Status::Errno("pipe2", "failure report", errno);
  UniqueFd report_r(report[0]), report_w(report[1]);
  int chan[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) != 0) {
    return Status::Errno("socketpair", "sandbox channel", errno);
  }
  UniqueFd channel(chan[0]), channel_child(chan[1]);
  FillSpec(in, report_w.get(), channel_child.get(), &p);

  // Block every signal across clone so that no handler of ours runs in the child before it has
  // reset the dispositions; the parent restores its mask right after.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  int pidfd = -1;
  clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = CLONE_PIDFD | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
               (in.netns_fd >= 0 ? 0 : CLONE_NEWNET);
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  const long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) SandboxChildMain(p.spec);  // never returns
  const int clone_err = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return Status::Errno("clone3", "the native sandbox", clone_err);

  Sandbox s;
  s.process_ = Subprocess::Adopt(static_cast<pid_t>(pid), UniqueFd(pidfd));
  s.channel_ = std::move(channel);
  s.report_ = std::move(report_r);
  s.uid_ = in.plan->process.uid;
  s.gid_ = in.plan->process.gid;
  for (const MountOp& op : p.ops) s.op_what_.push_back(op.what);
  return s;  // the child's ends close with `report_w` and `channel_child`
}

Status Sandbox::ChildFailure(const std::string& while_doing) {
  ChildReport r;
  const ssize_t n = read(report_.get(), &r, sizeof r);
  process_.KillAndWait();
  if (n != static_cast<ssize_t>(sizeof r)) {
    return Status::Internal("native: the sandbox's first process ended " + while_doing +
                            " without saying why");
  }
  std::string what = ChildStepName(r.step);
  if (r.step == kStepMount && r.index >= 0 && static_cast<size_t>(r.index) < op_what_.size()) {
    what += " (" + op_what_[static_cast<size_t>(r.index)] + ")";
  }
  return Status::Internal("native: the sandbox could not be set up: " + what + ": " +
                          std::strerror(r.err));
}

Status Sandbox::Waited(int wait, const std::string& what) {
  switch (static_cast<Wait>(wait)) {
    case Wait::kDone:
      return Status::Ok();
    case Wait::kEof:
      return ChildFailure("before " + what);
    case Wait::kCancelled:
      cancelled_ = true;
      process_.KillAndWait();
      return Status::Unavailable("native: the run was stopped before its program started");
    case Wait::kTimedOut:
      break;
  }
  process_.KillAndWait();
  return Status::Internal("native: the sandbox did not send " + what + " in time");
}

Status Sandbox::Place(const cgroup::RunCgroup& cg) {
  const std::string pid = std::to_string(process_.pid());
  for (const std::string& dir : cg.LimitDirs()) {
    Status st = WriteFile(dir + "/cgroup.procs", pid);
    if (!st.ok()) {
      process_.KillAndWait();
      return st.With("placing the sandbox in its cgroup");
    }
  }
  return Status::Ok();
}

Status Sandbox::MapIds(uint32_t host_id, Clock::time_point deadline,
                       const std::atomic<int>* cancel) {
  char msg = 0;
  SAFEX_RETURN_IF_ERROR(
      Waited(static_cast<int>(ReadFully(channel_.get(), &msg, 1, deadline, cancel)),
             "its user namespace"));
  if (msg != kMsgUserns) return Status::Internal("native: unexpected message from the sandbox");
  const std::string proc = "/proc/" + std::to_string(process_.pid());
  // Security: one id is mapped, the plan's inside to the run's leased id outside; the child can
  // never become anything else (setgroups is denied first, as the kernel requires for an
  // unprivileged map writer, and so no group can be dropped to gain access).
  const std::string id = std::to_string(host_id);
  SAFEX_RETURN_IF_ERROR(WriteFile(proc + "/setgroups", "deny"));
  SAFEX_RETURN_IF_ERROR(WriteFile(proc + "/uid_map", std::to_string(uid_) + " " + id + " 1\n"));
  SAFEX_RETURN_IF_ERROR(WriteFile(proc + "/gid_map", std::to_string(gid_) + " " + id + " 1\n"));
  const char mapped = kMsgMapped;
  if (write(channel_.get(), &mapped, 1) != 1) return ChildFailure("before its ids were mapped");
  return Status::Ok();
}

Result<SandboxReport> Sandbox::ReadReport(Clock::time_point deadline,
                                          const std::atomic<int>* cancel) {
  std::string bytes;
  Result<SandboxReport> report = Status::Unavailable("native: no report yet");
  while (report.status().code() == Status::Code::kUnavailable) {
    char buf[16384];
    size_t n = 0;
    // One byte at a time would do; a poll-bounded read of what is there is cheaper.
    SAFEX_RETURN_IF_ERROR(Waited(
        static_cast<int>(ReadFully(channel_.get(), buf, 1, deadline, cancel)), "its report"));
    n = 1;
    const ssize_t more = recv(channel_.get(), buf + 1, sizeof buf - 1, MSG_DONTWAIT);
    if (more > 0) n += static_cast<size_t>(more);
    bytes.append(buf, n);
    if (bytes.size() > 256 * 1024) return Status::DataLoss("native: the report is too large");
    report = ParseSandboxReport(bytes);
  }
  return report;
}

std::string Sandbox::HostIdentity() const {
  std::ifstream in("/proc/" + std::to_string(process_.pid()) + "/status");
  std::string uid = "?", gid = "?";
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string key, real;
    words >> key >> real;
    if (key == "Uid:") uid = real;
    if (key == "Gid:") gid = real;
  }
  return "uid " + uid + " gid " + gid;
}

Status Sandbox::Go(int* exec_errno) {
  *exec_errno = 0;
  const char go = kMsgGo;
  if (write(channel_.get(), &go, 1) != 1) return ChildFailure("before the go-ahead");
  channel_.Reset();
  // The failure report's pipe closes at the execve (close-on-exec): EOF means the program runs.
  ChildReport r;
  pollfd p{report_.get(), POLLIN, 0};
  if (poll(&p, 1, 30000) <= 0) {
    process_.KillAndWait();
    return Status::Internal("native: the program did not start within 30 s");
  }
  const ssize_t n = read(report_.get(), &r, sizeof r);
  if (n == 0) {
    report_.Reset();
    return Status::Ok();
  }
  if (n == static_cast<ssize_t>(sizeof r) && r.step == kStepExec) {
    *exec_errno = r.err;
    return Status::Ok();
  }
  process_.KillAndWait();
  return Status::Internal(
      "native: the program could not be started (" +
      std::string(n == static_cast<ssize_t>(sizeof r) ? ChildStepName(r.step) : "no report") + ")");
}

}  // namespace safex::drivers::native
