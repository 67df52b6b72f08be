#include "drivers/microvm/vmm_process.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace safex::microvm {
namespace {

enum Step : int32_t {
  kStepSignals = 1,
  kStepSetsid,
  kStepSetns,
  kStepDupHigh,
  kStepDupTarget,
  kStepCloseRange,
  kStepGroups,
  kStepGid,
  kStepUid,
  kStepPdeathsig,
  kStepNoNewPrivs,
  kStepGo,
  kStepExecve,
};

const char* StepName(int32_t s) {
  switch (s) {
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
    case kStepGroups:
      return "setgroups";
    case kStepGid:
      return "setresgid";
    case kStepUid:
      return "setresuid";
    case kStepPdeathsig:
      return "prctl(PR_SET_PDEATHSIG)";
    case kStepNoNewPrivs:
      return "prctl(PR_SET_NO_NEW_PRIVS)";
    case kStepGo:
      return "waiting for the cgroup";
    case kStepExecve:
      return "execve";
  }
  return "child setup";
}

struct Report {
  int32_t step;
  int32_t err;
};

constexpr size_t kMaxFds = 16;

struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  int fds[kMaxFds];
  size_t nfds;
  uid_t uid;
  gid_t gid;
  const gid_t* groups;
  size_t ngroups;
  int netns_fd;
  int report_fd;
  int go_fd;
  pid_t parent;
};

[[noreturn]] void Fail(int fd, int32_t step, int err) {
  Report r{step, err};
  (void)!write(fd, &r, sizeof r);
  _exit(127);
}

[[noreturn]] void ChildMain(const ChildPlan& p) {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) (void)sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, nullptr) != 0) Fail(p.report_fd, kStepSignals, errno);
  if (setsid() < 0) Fail(p.report_fd, kStepSetsid, errno);
  // Security: setns before dropping privileges; the fd is the run's own network namespace.
  if (p.netns_fd >= 0 && setns(p.netns_fd, CLONE_NEWNET) != 0) {
    Fail(p.report_fd, kStepSetns, errno);
  }
  // Move every source above the targets first, so that no dup2 clobbers a later source.
  int hi[kMaxFds];
  int report = fcntl(p.report_fd, F_DUPFD_CLOEXEC, 100);
  int go = fcntl(p.go_fd, F_DUPFD_CLOEXEC, 100);
  if (report < 0 || go < 0) Fail(p.report_fd, kStepDupHigh, errno);
  for (size_t i = 0; i < p.nfds; ++i) {
    hi[i] = fcntl(p.fds[i], F_DUPFD_CLOEXEC, 100);
    if (hi[i] < 0) Fail(report, kStepDupHigh, errno);
  }
  for (size_t i = 0; i < p.nfds; ++i) {
    if (dup2(hi[i], static_cast<int>(i)) < 0) Fail(report, kStepDupTarget, errno);
  }
  // Everything else goes, except the two pipes (close-on-exec; moved right above the map).
  int report_low = static_cast<int>(p.nfds), go_low = static_cast<int>(p.nfds) + 1;
  if (dup3(report, report_low, O_CLOEXEC) < 0 || dup3(go, go_low, O_CLOEXEC) < 0) {
    Fail(report, kStepDupTarget, errno);
  }
  report = report_low;
  go = go_low;
  if (close_range(static_cast<unsigned>(go_low) + 1, ~0U, 0) != 0) {
    Fail(report, kStepCloseRange, errno);
  }
  if (setgroups(p.ngroups, p.groups) != 0) Fail(report, kStepGroups, errno);
  if (setresgid(p.gid, p.gid, p.gid) != 0) Fail(report, kStepGid, errno);
  if (setresuid(p.uid, p.uid, p.uid) != 0) Fail(report, kStepUid, errno);
  // After the uid change: a credential change clears the parent-death signal.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) Fail(report, kStepPdeathsig, errno);
  if (getppid() != p.parent) _exit(127);  // the supervisor is already gone
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Fail(report, kStepNoNewPrivs, errno);
  char c = 0;
  ssize_t n;
  do {
    n = read(go, &c, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) Fail(report, kStepGo, n < 0 ? errno : ECANCELED);
  execve(p.path, p.argv, p.envp);
  Fail(report, kStepExecve, errno);
}

Status WriteProcs(const std::string& file, pid_t pid) {
  int fd = open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::Errno("open", file, errno);
  std::string s = std::to_string(pid);
  ssize_t n = write(fd, s.data(), s.size());
  int e = errno;
  close(fd);
  if (n != static_cast<ssize_t>(s.size())) return Status::Errno("write", file, n < 0 ? e : EIO);
  return Status::Ok();
}

}  // namespace

VmmProcess::~VmmProcess() {
  if (pidfd_.valid() && !exit_) KillAndWait();
}

VmmProcess::VmmProcess(VmmProcess&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), pidfd_(std::move(o.pidfd_)), exit_(std::move(o.exit_)) {}

VmmProcess& VmmProcess::operator=(VmmProcess&& o) noexcept {
  if (this != &o) {
    if (pidfd_.valid() && !exit_) KillAndWait();
    pid_ = std::exchange(o.pid_, -1);
    pidfd_ = std::move(o.pidfd_);
    exit_ = std::move(o.exit_);
  }
  return *this;
}

Result<VmmProcess> VmmProcess::Spawn(const VmmSpawnOptions& o) {
  if (o.argv.empty() || o.argv[0].empty() || o.argv[0][0] != '/') {
    return Status::InvalidArgument("vmm: argv[0] must be an absolute path");
  }
  if (o.fds.size() > kMaxFds) return Status::InvalidArgument("vmm: too many fds");
  std::vector<char*> argv;
  for (const std::string& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char* envp[] = {nullptr};

  int report_pipe[2], go_pipe[2];
  if (pipe2(report_pipe, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  UniqueFd report_r(report_pipe[0]), report_w(report_pipe[1]);
  if (pipe2(go_pipe, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  UniqueFd go_r(go_pipe[0]), go_w(go_pipe[1]);

  ChildPlan p{};
  p.path = argv[0];
  p.argv = argv.data();
  p.envp = envp;
  p.nfds = o.fds.size();
  for (size_t i = 0; i < o.fds.size(); ++i) p.fds[i] = o.fds[i];
  p.uid = o.uid;
  p.gid = o.gid;
  p.groups = o.groups.data();
  p.ngroups = o.groups.size();
  p.netns_fd = o.netns_fd;
  p.report_fd = report_w.get();
  p.go_fd = go_r.get();
  p.parent = getpid();

  int pidfd = -1;
  clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = CLONE_PIDFD;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) ChildMain(p);
  if (pid < 0) return Status::Errno("clone3", errno);
  VmmProcess proc(static_cast<pid_t>(pid), UniqueFd(pidfd));
  report_w.Reset();
  go_r.Reset();

  for (const std::string& f : o.cgroup_procs_files) {
    Status st = WriteProcs(f, proc.pid_);
    if (!st.ok()) {
      proc.KillAndWait();
      return st.With("placing the VMM in its cgroup");
    }
  }
  char go = 1;
  if (write(go_w.get(), &go, 1) != 1) {
    proc.KillAndWait();
    return Status::Errno("write", "vmm go pipe", errno);
  }
  go_w.Reset();
  Report r{};
  ssize_t n;
  do {
    n = read(report_r.get(), &r, sizeof r);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return proc;  // EOF: execve succeeded
  proc.KillAndWait();
  if (n != sizeof r) return Status::Internal("vmm: child failed without a report");
  std::string what = std::string("starting ") + o.argv[0] + ": " + StepName(r.step);
  return Status::Errno(what, r.err);
}

std::optional<VmmExit> VmmProcess::Reap(bool block) {
  if (exit_) return exit_;
  if (!pidfd_.valid()) return VmmExit{};
  siginfo_t si;
  std::memset(&si, 0, sizeof si);
  int flags = WEXITED | (block ? 0 : WNOHANG);
  for (;;) {
    int rc = waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &si, flags);
    if (rc != 0 && errno == EINTR) continue;
    if (rc != 0) {
      exit_ = VmmExit{};  // ECHILD: already reaped elsewhere
      return exit_;
    }
    break;
  }
  if (si.si_pid == 0) return std::nullopt;  // WNOHANG and still running
  VmmExit e;
  e.exited = si.si_code == CLD_EXITED;
  (e.exited ? e.code : e.signal) = si.si_status;
  exit_ = e;
  return exit_;
}

VmmExit VmmProcess::KillAndWait() {
  if (exit_) return *exit_;
  if (!pidfd_.valid()) return VmmExit{};
  (void)syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
  return *Reap(true);
}

std::optional<VmmExit> VmmProcess::WaitUntil(Clock::time_point deadline) {
  for (;;) {
    if (auto e = Reap(false)) return e;
    auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    pollfd pfd{pidfd_.get(), POLLIN, 0};
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    poll(&pfd, 1, static_cast<int>(std::min<long long>(ms + 1, 1000)));
  }
}

}  // namespace safex::microvm
