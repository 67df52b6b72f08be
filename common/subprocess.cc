#include "common/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <new>

#include "common/exec_prep.h"
#include "common/pidfd.h"
#include "common/raw_credentials.h"

namespace safex {
namespace {

// Steps of the child between clone and execve, reported with errno when one fails.
enum ChildStep : int32_t {
  kStepPdeathsig = 1,
  kStepSignals,
  kStepSetsid,
  kStepSetns,
  kStepDupHigh,
  kStepDupTarget,
  kStepCloseRange,
  kStepChdir,
  kStepExecve,
  kStepMountPrivate,
  kStepBindMount,
  kStepGroups,
  kStepGid,
  kStepUid,
  kStepNoNewPrivs,
  kStepGo,
};

const char* StepName(int32_t step) {
  switch (step) {
    case kStepPdeathsig:
      return "prctl(PR_SET_PDEATHSIG)";
    case kStepSignals:
      return "sigprocmask";
    case kStepSetsid:
      return "setsid";
    case kStepSetns:
      return "setns(CLONE_NEWNET)";
    case kStepDupHigh:
      return "fcntl(F_DUPFD_CLOEXEC)";
    case kStepDupTarget:
      return "dup2";
    case kStepCloseRange:
      return "close_range";
    case kStepChdir:
      return "chdir";
    case kStepExecve:
      return "execve";
    case kStepMountPrivate:
      return "mount(MS_REC|MS_PRIVATE)";
    case kStepBindMount:
      return "mount(MS_BIND)";
    case kStepGroups:
      return "setgroups";
    case kStepGid:
      return "setresgid";
    case kStepUid:
      return "setresuid";
    case kStepNoNewPrivs:
      return "prctl(PR_SET_NO_NEW_PRIVS)";
    case kStepGo:
      return "waiting to be placed in its cgroup";
  }
  return "child setup";
}

struct ChildReport {
  int32_t step;
  int32_t err;
};

// Everything the child needs, prepared by the parent before clone so that the child only reads
// memory and makes system calls.
struct ChildPlan {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;
  int report_fd = -1;
  pid_t parent_pid = 0;
  int pdeath_signal = 0;
  bool new_session = false;
  int netns_fd = -1;
  size_t nfds = 0;
  std::array<int, SpawnOptions::kMaxFds> target{};
  std::array<int, SpawnOptions::kMaxFds> source{};
  int high_base = 0;  // above every fd the child must preserve or create
  static constexpr size_t kMaxMounts = 16;
  size_t nmounts = 0;
  std::array<const char*, kMaxMounts> mount_source{};
  std::array<const char*, kMaxMounts> mount_target{};
  bool set_credentials = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const gid_t* groups = nullptr;
  size_t ngroups = 0;
  bool no_new_privs = false;
  int go_fd = -1;  // read end of the "go" pipe; -1: no barrier
};

[[noreturn]] void ChildFail(int report_fd, int32_t step) {
  ChildReport r{step, errno};
  // Nothing useful can be done if this write fails: the parent then sees EOF with no exit.
  ssize_t n = write(report_fd, &r, sizeof r);
  (void)n;
  _exit(127);
}

// Runs in the child. No allocation, no logging, no locks: system calls only.
[[noreturn]] void ChildMain(const ChildPlan& p) {
  int report = p.report_fd;
  if (p.pdeath_signal != 0) {
    if (prctl(PR_SET_PDEATHSIG, p.pdeath_signal) != 0) ChildFail(report, kStepPdeathsig);
    // The parent may have died before prctl took effect; then nobody would kill us later.
    if (getppid() != p.parent_pid) _exit(127);
  }

  if (!ResetSignalsForExec()) ChildFail(report, kStepSignals);

  if (p.new_session && setsid() < 0) ChildFail(report, kStepSetsid);
  // Security: joining another network namespace needs CAP_SYS_ADMIN; the fd names a namespace the
  // caller created for this run, so the child can reach exactly what that namespace routes.
  if (p.netns_fd >= 0 && setns(p.netns_fd, CLONE_NEWNET) != 0) ChildFail(report, kStepSetns);

  // Security: the mounts happen in a mount namespace of the child's own (CLONE_NEWNS), made
  // private first so that nothing propagates back to the caller's; they vanish with the child.
  if (p.nmounts > 0 && mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    ChildFail(report, kStepMountPrivate);
  }
  for (size_t i = 0; i < p.nmounts; ++i) {
    if (mount(p.mount_source[i], p.mount_target[i], nullptr, MS_BIND, nullptr) != 0) {
      ChildFail(report, kStepBindMount);
    }
  }

  // Move the report and go pipes and every source above all targets first, so that installing
  // one target can never clobber a source still to be installed.
  std::array<int, SpawnOptions::kMaxFds> high{};
  for (size_t i = 0; i < p.nfds; ++i) {
    high[i] = fcntl(p.source[i], F_DUPFD_CLOEXEC, p.high_base);
    if (high[i] < 0) ChildFail(report, kStepDupHigh);
  }
  int moved_report = fcntl(report, F_DUPFD_CLOEXEC, p.high_base);
  if (moved_report < 0) ChildFail(report, kStepDupHigh);
  report = moved_report;
  int go = -1;
  if (p.go_fd >= 0 && (go = fcntl(p.go_fd, F_DUPFD_CLOEXEC, p.high_base)) < 0) {
    ChildFail(report, kStepDupHigh);
  }
  int max_target = -1;
  for (size_t i = 0; i < p.nfds; ++i) {
    // dup2 clears FD_CLOEXEC on the new descriptor: it is meant to survive execve.
    if (dup2(high[i], p.target[i]) < 0) ChildFail(report, kStepDupTarget);
    max_target = std::max(max_target, p.target[i]);
  }
  // Close every descriptor that is neither a target nor one of the (close-on-exec) pipes.
  for (int fd = 0; fd <= max_target; ++fd) {
    bool keep = false;
    for (size_t i = 0; i < p.nfds; ++i) keep = keep || p.target[i] == fd;
    if (!keep) close(fd);
  }
  const int keep_low = go < 0 ? report : std::min(report, go);
  const int keep_high = go < 0 ? report : std::max(report, go);
  unsigned first = static_cast<unsigned>(max_target + 1);
  if (static_cast<unsigned>(keep_low) > first &&
      close_range(first, static_cast<unsigned>(keep_low) - 1, 0) != 0) {
    ChildFail(report, kStepCloseRange);
  }
  if (keep_high > keep_low + 1 && close_range(static_cast<unsigned>(keep_low) + 1,
                                              static_cast<unsigned>(keep_high) - 1, 0) != 0) {
    ChildFail(report, kStepCloseRange);
  }
  if (close_range(static_cast<unsigned>(keep_high) + 1, ~0U, 0) != 0) {
    ChildFail(report, kStepCloseRange);
  }

  if (p.set_credentials) {
    // Groups first, then gid, then uid: after setresuid the child could no longer change them.
    if (RawSetgroups(p.ngroups, p.groups) != 0) ChildFail(report, kStepGroups);
    if (RawSetresgid(p.gid) != 0) ChildFail(report, kStepGid);
    if (RawSetresuid(p.uid) != 0) ChildFail(report, kStepUid);
    // A credential change clears the parent-death signal: set it again, and re-check the parent.
    if (p.pdeath_signal != 0) {
      if (prctl(PR_SET_PDEATHSIG, p.pdeath_signal) != 0) ChildFail(report, kStepPdeathsig);
      if (getppid() != p.parent_pid) _exit(127);
    }
  }
  if (p.no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    ChildFail(report, kStepNoNewPrivs);
  }
  if (go >= 0) {
    // The parent writes one byte once the pid is in every cgroup; EOF means it gave up.
    char c = 0;
    ssize_t n;
    do {
      n = read(go, &c, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) {
      if (n == 0) errno = ECANCELED;
      ChildFail(report, kStepGo);
    }
  }

  if (p.cwd != nullptr && chdir(p.cwd) != 0) ChildFail(report, kStepChdir);
  execve(p.path, p.argv, p.envp);
  ChildFail(report, kStepExecve);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// The child's own stack when it shares our memory: it must never run on the stack of the thread
// that waits in clone. ChildMain needs a few KiB; the rest is margin.
constexpr size_t kChildStackBytes = 128 * 1024;

int ChildEntry(void* plan) { ChildMain(*static_cast<const ChildPlan*>(plan)); }

// Starts the child running ChildMain(plan); returns its pid (the pidfd in *pidfd), or -1 with
// errno. `share_memory` (no go barrier: nothing of ours has to run before the child execs): the
// child shares our memory and this thread sleeps until it has exec'd or exited (CLONE_VM |
// CLONE_VFORK, as posix_spawn does). A copy of a large, many-threaded daemon's address space
// (page tables copied, every written page made copy-on-write for both sides) cost the service
// milliseconds of CPU per sandbox; this copies nothing. It is safe because the child only reads
// the plan, writes its own stack and errno (this thread's, which sleeps meanwhile), and makes raw
// system calls: nothing that takes a lock or changes glibc's state for the other threads (the
// credential calls are raw for that reason, raw_credentials.h). With a barrier this thread must
// run while the child waits (it places the child in its cgroups), so the child gets its own copy.
// Under AddressSanitizer always the copy: its interceptors (sigaction) and stack bookkeeping
// would run in the child on our shared state.
long CloneChild(ChildPlan& plan, bool new_mount_ns, bool share_memory, int* pidfd) {
  if (share_memory && !kSanitized) {
    std::unique_ptr<char[]> stack(new (std::nothrow) char[kChildStackBytes]);
    if (stack == nullptr) {
      errno = ENOMEM;
      return -1;
    }
    const auto top = reinterpret_cast<uintptr_t>(stack.get() + kChildStackBytes) & ~uintptr_t{15};
    const int flags =
        CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD | (new_mount_ns ? CLONE_NEWNS : 0);
    // With CLONE_PIDFD, clone(2) stores the pidfd where the parent tid would go.
    return clone(ChildEntry, reinterpret_cast<void*>(top), flags, &plan, pidfd);
  }
  struct clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = CLONE_PIDFD | (new_mount_ns ? CLONE_NEWNS : 0);
  args.pidfd = reinterpret_cast<uint64_t>(pidfd);
  args.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) ChildMain(plan);  // never returns
  return pid;
}

Status WriteCgroupProcs(const std::string& file, pid_t pid) {
  UniqueFd fd(open(file.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::Errno("open", file, errno);
  const std::string text = std::to_string(pid);
  const ssize_t n = write(fd.get(), text.data(), text.size());
  if (n != static_cast<ssize_t>(text.size()))
    return Status::Errno("write", file, n < 0 ? errno : EIO);
  return Status::Ok();
}

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

ExitStatus FromSiginfo(const siginfo_t& si) {
  ExitStatus st;
  if (si.si_code == CLD_EXITED) {
    st.exited = true;
    st.code = si.si_status;
  } else {
    st.exited = false;
    st.signal = si.si_status;
  }
  return st;
}

}  // namespace

Subprocess::~Subprocess() {
  if (valid() && !reaped()) KillAndWait();
}

Subprocess::Subprocess(Subprocess&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), pidfd_(std::move(o.pidfd_)), status_(o.status_) {
  o.status_.reset();
}

Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  if (this != &o) {
    if (valid() && !reaped()) KillAndWait();
    pid_ = std::exchange(o.pid_, -1);
    pidfd_ = std::move(o.pidfd_);
    status_ = o.status_;
    o.status_.reset();
  }
  return *this;
}

namespace {

bool HasNulIn(const std::vector<std::string>& v) {
  return std::any_of(v.begin(), v.end(), [](const std::string& s) { return HasNul(s); });
}

// What Spawn refuses before anything exists: every string goes to a system call as a C string.
Status CheckOptions(const SpawnOptions& o) {
  if (o.argv.empty() || o.argv[0].empty() || o.argv[0][0] != '/') {
    return Status::InvalidArgument("spawn: argv[0] must be an absolute path");
  }
  if (HasNulIn(o.argv)) return Status::InvalidArgument("spawn: argv element contains a NUL byte");
  for (const std::string& s : o.env) {
    if (HasNul(s) || s.find('=') == std::string::npos) {
      return Status::InvalidArgument("spawn: environment entries must be NAME=value without NUL");
    }
  }
  if (o.fds.size() > SpawnOptions::kMaxFds) {
    return Status::InvalidArgument("spawn: too many descriptors to pass");
  }
  if (HasNul(o.cwd)) return Status::InvalidArgument("spawn: cwd contains a NUL byte");
  if (o.bind_mounts.size() > ChildPlan::kMaxMounts) {
    return Status::InvalidArgument("spawn: too many bind mounts");
  }
  for (const auto& [source, target] : o.bind_mounts) {
    if (HasNul(source) || HasNul(target) || source.empty() || target.empty()) {
      return Status::InvalidArgument("spawn: bad bind mount");
    }
  }
  for (size_t i = 0; i < o.fds.size(); ++i) {
    auto [target, source] = o.fds[i];
    if (target < 0 || target >= 1024 || source < 0) {
      return Status::InvalidArgument("spawn: bad descriptor mapping");
    }
    for (size_t j = 0; j < i; ++j) {
      if (o.fds[j].first == target) {
        return Status::InvalidArgument("spawn: child descriptor mapped twice");
      }
    }
  }
  return Status::Ok();
}

// The child's plan: pointers into `o` and the caller's vectors, which outlive the clone.
ChildPlan MakeChildPlan(const SpawnOptions& o, char* const* argv, char* const* envp) {
  ChildPlan plan;
  plan.path = o.argv[0].c_str();
  plan.argv = argv;
  plan.envp = envp;
  plan.cwd = o.cwd.empty() ? nullptr : o.cwd.c_str();
  plan.parent_pid = getpid();
  plan.pdeath_signal = o.parent_death_signal;
  plan.new_session = o.new_session;
  plan.netns_fd = o.netns_fd;
  plan.nfds = o.fds.size();
  for (size_t i = 0; i < o.fds.size(); ++i) {
    plan.target[i] = o.fds[i].first;
    plan.source[i] = o.fds[i].second;
  }
  plan.nmounts = o.bind_mounts.size();
  for (size_t i = 0; i < o.bind_mounts.size(); ++i) {
    plan.mount_source[i] = o.bind_mounts[i].first.c_str();
    plan.mount_target[i] = o.bind_mounts[i].second.c_str();
  }
  if (o.credentials) {
    plan.set_credentials = true;
    plan.uid = o.credentials->uid;
    plan.gid = o.credentials->gid;
    plan.groups = o.credentials->groups.data();
    plan.ngroups = o.credentials->groups.size();
  }
  plan.no_new_privs = o.no_new_privs;
  return plan;
}

// Reads the child's {step, errno} report: 0 bytes means the pipe closed on execve.
size_t ReadReport(int fd, ChildReport* report) {
  size_t got = 0;
  while (got < sizeof *report) {
    ssize_t n = read(fd, reinterpret_cast<char*>(report) + got, sizeof *report - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

}  // namespace

// In order: check the options, make the pipes, clone (all signals blocked across it), place the
// child in its cgroups and release it, then learn from the report pipe whether execve happened.
Result<Subprocess> Subprocess::Spawn(const SpawnOptions& options) {
  SAFEX_RETURN_IF_ERROR(CheckOptions(options));
  int report_pipe[2];
  if (pipe2(report_pipe, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  UniqueFd report_r(report_pipe[0]);
  UniqueFd report_w(report_pipe[1]);
  UniqueFd go_r, go_w;
  if (!options.cgroup_procs_files.empty()) {
    int go_pipe[2];
    if (pipe2(go_pipe, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
    go_r = UniqueFd(go_pipe[0]);
    go_w = UniqueFd(go_pipe[1]);
  }

  std::vector<char*> argv = CStrings(options.argv);
  std::vector<char*> envp = CStrings(options.env);
  ChildPlan plan = MakeChildPlan(options, argv.data(), envp.data());
  plan.report_fd = report_w.get();
  plan.go_fd = go_r.valid() ? go_r.get() : -1;
  int highest =
      std::max({2, report_pipe[0], report_pipe[1], options.netns_fd, go_r.get(), go_w.get()});
  for (const auto& [target, source] : options.fds) highest = std::max({highest, target, source});
  plan.high_base = highest + 1;

  // Block every signal across clone so that no handler of ours runs in the child before it has
  // reset the dispositions; the parent restores its mask right after.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  int pidfd = -1;
  long pid = CloneChild(plan, !options.bind_mounts.empty(), !go_w.valid(), &pidfd);
  int clone_err = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return Status::Errno("clone3", options.argv[0], clone_err);

  Subprocess child(static_cast<pid_t>(pid), UniqueFd(pidfd));
  // The pidfd from CLONE_PIDFD is close-on-exec, so it never reaches other children. Closing our
  // write end leaves the child's (close-on-exec) copy: EOF then means execve succeeded.
  report_w.Reset();
  go_r.Reset();
  if (go_w.valid()) {
    for (const std::string& file : options.cgroup_procs_files) {
      Status placed = WriteCgroupProcs(file, child.pid_);
      if (!placed.ok()) {
        child.KillAndWait();
        return placed.With("placing " + options.argv[0] + " in its cgroup");
      }
    }
    const char go = 1;
    if (write(go_w.get(), &go, 1) != 1) {
      const int err = errno;
      child.KillAndWait();
      return Status::Errno("write", "go pipe", err);
    }
    go_w.Reset();
  }

  ChildReport report{};
  const size_t got = ReadReport(report_r.get(), &report);
  if (got == 0) return child;  // the pipe closed on execve: the program is running
  child.Wait().status().ok();  // reap the failed child (it exits at once)
  if (got != sizeof report) {
    return Status::Internal("spawn " + options.argv[0] + ": truncated report from the child");
  }
  return Status::Errno(StepName(report.step), options.argv[0], report.err);
}

Status Subprocess::Signal(int sig) {
  if (!valid()) return Status::FailedPrecondition("signal: no process");
  if (reaped()) return Status::Ok();
  if (PidfdSendSignal(pidfd_.get(), sig) != 0) {
    if (errno == ESRCH) return Status::Ok();  // exited, not yet reaped
    return Status::Errno("pidfd_send_signal", std::to_string(pid_), errno);
  }
  return Status::Ok();
}

Result<std::optional<ExitStatus>> Subprocess::TryWait() {
  if (!valid()) return Status::FailedPrecondition("wait: no process");
  if (status_) return status_;
  siginfo_t si;
  std::memset(&si, 0, sizeof si);
  while (waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &si, WEXITED | WNOHANG) != 0) {
    if (errno != EINTR) return Status::Errno("waitid", std::to_string(pid_), errno);
  }
  if (si.si_pid == 0) return std::optional<ExitStatus>();
  status_ = FromSiginfo(si);
  return status_;
}

Result<std::optional<ExitStatus>> Subprocess::Wait(std::optional<Clock::time_point> deadline) {
  if (!valid()) return Status::FailedPrecondition("wait: no process");
  while (!status_) {
    int timeout_ms = -1;
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
    }
    pollfd pfd{pidfd_.get(), POLLIN, 0};
    int r = poll(&pfd, 1, timeout_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("poll", "pidfd", errno);
    }
    if (r == 0) return std::optional<ExitStatus>();
    auto st = TryWait();
    if (!st.ok()) return st.status();
  }
  return status_;
}

ExitStatus Subprocess::KillAndWait() {
  if (status_) return *status_;
  if (!valid()) return ExitStatus{};
  Signal(SIGKILL).ok();  // failure leaves nothing better to do than wait
  auto st = Wait();
  if (st.ok() && st->has_value()) return **st;
  return ExitStatus{};
}

Result<ToolOutput> RunTool(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                           size_t cap) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  UniqueFd r(p[0]), w(p[1]);
  UniqueFd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!devnull) return Status::Errno("open", "/dev/null", errno);
  SpawnOptions so;
  so.argv = argv;
  so.fds = {{0, devnull.get()}, {1, w.get()}, {2, w.get()}};
  SAFEX_ASSIGN_OR_RETURN(Subprocess child, Subprocess::Spawn(so));
  w.Reset();
  devnull.Reset();

  ToolOutput out;
  auto deadline = Subprocess::Clock::now() + timeout;
  bool eof = false;
  while (!eof) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Subprocess::Clock::now());
    if (left.count() <= 0) {
      out.timed_out = true;
      break;
    }
    pollfd pfd{r.get(), POLLIN, 0};
    int n = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), INT_MAX)));
    if (n < 0 && errno != EINTR) return Status::Errno("poll", argv[0], errno);
    if (n <= 0) continue;
    char buf[4096];
    ssize_t got = read(r.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      eof = true;
      break;
    }
    size_t take = std::min(static_cast<size_t>(got), cap - std::min(cap, out.output.size()));
    out.output.append(buf, take);
  }
  if (out.timed_out) {
    out.status = child.KillAndWait();
    return out;
  }
  SAFEX_ASSIGN_OR_RETURN(std::optional<ExitStatus> st, child.Wait(deadline));
  if (!st) {
    out.timed_out = true;
    out.status = child.KillAndWait();
  } else {
    out.status = *st;
  }
  return out;
}

}  // namespace safex
