#include "guest/workload.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/exec_prep.h"
#include "common/raw_credentials.h"
#include "drivers/exec_candidates.h"
#include "drivers/sandbox_report_writer.h"
#include "guest/guest_root.h"
#include "guest/heartbeat.h"
#include "guest/util.h"

namespace safex::guest {
namespace {

using microvm::ExitReport;
using microvm::FrameType;
using microvm::GuestLimit;

enum ChildStep : int32_t {
  kStepDupHigh = 1,
  kStepDupTarget,
  kStepCloseRange,
  kStepSetsid,
  kStepSignals,
  kStepMountPrivate,
  kStepChdirRoot,
  kStepPivotRoot,
  kStepDetachOld,
  kStepMountProc,
  kStepHostname,
  kStepRlimit,
  kStepCapBound,
  kStepGroups,
  kStepGid,
  kStepUid,
  kStepCapset,
  kStepAmbient,
  kStepNoNewPrivs,
  kStepChdir,
  kStepSeccomp,
  kStepEvidence,
  kStepExec,
};

const char* StepName(int32_t s) {
  switch (s) {
    case kStepDupHigh:
      return "fcntl(F_DUPFD_CLOEXEC)";
    case kStepDupTarget:
      return "dup2";
    case kStepCloseRange:
      return "close_range";
    case kStepSetsid:
      return "setsid";
    case kStepSignals:
      return "signal dispositions";
    case kStepMountPrivate:
      return "mount(MS_PRIVATE)";
    case kStepChdirRoot:
      return "chdir(workload root)";
    case kStepPivotRoot:
      return "pivot_root";
    case kStepDetachOld:
      return "umount2(old root)";
    case kStepMountProc:
      return "mount(/proc)";
    case kStepHostname:
      return "sethostname";
    case kStepRlimit:
      return "setrlimit";
    case kStepCapBound:
      return "prctl(PR_CAPBSET_DROP)";
    case kStepGroups:
      return "setgroups";
    case kStepGid:
      return "setresgid";
    case kStepUid:
      return "setresuid";
    case kStepCapset:
      return "capset";
    case kStepAmbient:
      return "prctl(PR_CAP_AMBIENT)";
    case kStepNoNewPrivs:
      return "prctl(PR_SET_NO_NEW_PRIVS)";
    case kStepChdir:
      return "chdir(cwd)";
    case kStepSeccomp:
      return "seccomp";
    case kStepEvidence:
      return "evidence report";
    case kStepExec:
      return "execve";
  }
  return "child setup";
}

struct Report {
  int32_t step;
  int32_t err;
};

struct Limit {
  int resource;
  rlim_t value;
};

// Everything the child reads, prepared before clone3.
struct ChildPlan {
  int stdin_fd, stdout_fd, stderr_fd, report_fd;
  int evidence_fd, go_fd;  // the sandbox report out (drivers/sandbox_report.h), the go-ahead in
  const char* root;
  const char* cwd;
  const char* hostname;
  size_t hostname_len;
  uint32_t uid, gid;
  Limit limits[5];
  sock_fprog seccomp;
  char* const* argv;
  char* const* envp;
  const char* const* candidates;  // absolute paths to try for argv[0], nullptr-terminated
};

[[noreturn]] void ChildFail(int fd, int32_t step, int err) {
  Report r{step, err};
  (void)!write(fd, &r, sizeof r);
  _exit(127);
}

// What the program will get, read by the process that becomes it, under everything applied
// (drivers/sandbox_report.h), then the host's answer: 'g' or nothing ran.
void ReportAndAwaitGoAhead(int report) {
  if (!drivers::WriteSandboxReport(4)) ChildFail(report, kStepEvidence, errno);
  close(4);
  char go = 0;
  ssize_t r;
  do {
    r = read(5, &go, 1);
  } while (r < 0 && errno == EINTR);
  close(5);
  if (r != 1 || go != 'g') ChildFail(report, kStepEvidence, EPERM);
}

// The child between clone3 and execve. Only reads `p` and makes system calls. Its descriptors:
// 0-2 stdio, 3 the failure report (closed by a successful exec), 4 the sandbox report, 5 the
// go-ahead (both closed before the exec).
[[noreturn]] void ChildMain(const ChildPlan& p) {
  int report = p.report_fd;
  int hi[6];
  const int src[6] = {p.stdin_fd, p.stdout_fd, p.stderr_fd, p.report_fd, p.evidence_fd, p.go_fd};
  for (int i = 0; i < 6; ++i) {
    hi[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 64);
    if (hi[i] < 0) ChildFail(report, kStepDupHigh, errno);
  }
  report = hi[3];
  for (int i = 0; i < 3; ++i) {
    if (dup2(hi[i], i) < 0) ChildFail(report, kStepDupTarget, errno);
  }
  for (int i = 3; i < 6; ++i) {
    if (dup3(hi[i], i, O_CLOEXEC) < 0) ChildFail(report, kStepDupTarget, errno);
  }
  report = 3;
  if (close_range(6, ~0U, 0) != 0) ChildFail(report, kStepCloseRange, errno);
  if (setsid() < 0) ChildFail(report, kStepSetsid, errno);
  if (!ResetSignalsForExec()) ChildFail(report, kStepSignals, errno);

  // Security: the child has its own mount namespace (CLONE_NEWNS); nothing here propagates back.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    ChildFail(report, kStepMountPrivate, errno);
  }
  if (chdir(p.root) != 0) ChildFail(report, kStepChdirRoot, errno);
  // pivot_root(".", ".") stacks the old root under the new one; detaching it leaves the workload
  // with only its own root (the agent's tmpfs, /dev and the disks become unreachable).
  if (syscall(SYS_pivot_root, ".", ".") != 0) ChildFail(report, kStepPivotRoot, errno);
  if (umount2(".", MNT_DETACH) != 0) ChildFail(report, kStepDetachOld, errno);
  if (chdir("/") != 0) ChildFail(report, kStepChdirRoot, errno);
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    ChildFail(report, kStepMountProc, errno);
  }
  if (sethostname(p.hostname, p.hostname_len) != 0) ChildFail(report, kStepHostname, errno);
  for (const Limit& l : p.limits) {
    rlimit r{l.value, l.value};
    if (setrlimit(l.resource, &r) != 0) ChildFail(report, kStepRlimit, errno);
  }
  for (int cap = 0; cap <= 63; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      ChildFail(report, kStepCapBound, errno);
    }
  }
  if (RawSetgroups(0, nullptr) != 0) ChildFail(report, kStepGroups, errno);
  if (RawSetresgid(p.gid) != 0) ChildFail(report, kStepGid, errno);
  if (RawSetresuid(p.uid) != 0) ChildFail(report, kStepUid, errno);
  // A non-root uid has lost its capabilities with setresuid; uid 0 drops them here.
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2];
  std::memset(data, 0, sizeof data);
  if (syscall(SYS_capset, &hdr, data) != 0) ChildFail(report, kStepCapset, errno);
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    ChildFail(report, kStepAmbient, errno);
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(report, kStepNoNewPrivs, errno);
  if (chdir(p.cwd) != 0) ChildFail(report, kStepChdir, errno);
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p.seccomp, 0, 0) != 0) {
    ChildFail(report, kStepSeccomp, errno);
  }
  ReportAndAwaitGoAhead(report);
  // execvpe would take PATH from the agent's environment, not the plan's: walk the candidates.
  ChildFail(report, kStepExec, drivers::ExecFirstCandidate(p.candidates, p.argv, p.envp));
}

// The child's report to `approve` (the host), and its answer back. A child that failed before
// its report sends nothing (EOF): its failure report says why.
void ForwardEvidence(int ev_fd, int go_fd, const std::function<bool(const std::string&)>& approve) {
  std::string report;
  char buf[16384];
  for (;;) {
    ssize_t n = read(ev_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    report.append(buf, static_cast<size_t>(n));
    if (report.size() > 64 * 1024) break;  // more than the child ever writes: no go-ahead
  }
  if (report.empty() || report.size() > 64 * 1024) return;
  if (approve && !approve(report)) return;
  const char go = 'g';
  (void)!write(go_fd, &go, 1);
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

rlim_t CpuRlimitSeconds(uint64_t cpu_ns) {
  // A per-process backstop one second above the plan's total: the agent's cgroup accounting
  // (which covers every process) kills first.
  return static_cast<rlim_t>(cpu_ns / 1000000000ull + 2);
}

}  // namespace

SpawnOutcome SpawnWorkload(const microvm::GuestSpec& spec, const std::vector<sock_filter>& program,
                           const WorkloadCgroup& cgroup,
                           const std::function<bool(const std::string&)>& approve) {
  SpawnOutcome out;
  if (spec.argv.empty()) {
    out.setup_error = "empty argv";
    return out;
  }
  std::vector<std::string> candidates = drivers::ExecCandidates(spec.argv[0], spec.path_search);
  std::vector<const char*> cand_ptrs;
  for (const std::string& c : candidates) cand_ptrs.push_back(c.c_str());
  cand_ptrs.push_back(nullptr);
  std::vector<char*> argv = CStrings(spec.argv);
  std::vector<char*> envp = CStrings(spec.env);

  int in_pipe[2] = {-1, -1}, out_pipe[2], err_pipe[2], rep_pipe[2], ev_pipe[2], go_pipe[2];
  int devnull = -1;
  if (spec.has_stdin) {
    if (pipe2(in_pipe, O_CLOEXEC) != 0) {
      out.setup_error = ErrnoMessage("pipe2");
      return out;
    }
  } else {
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    in_pipe[0] = devnull;
  }
  if (in_pipe[0] < 0 || pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
      pipe2(rep_pipe, O_CLOEXEC) != 0 || pipe2(ev_pipe, O_CLOEXEC) != 0 ||
      pipe2(go_pipe, O_CLOEXEC) != 0) {
    out.setup_error = ErrnoMessage("pipe2");
    return out;
  }

  ChildPlan p{};
  p.stdin_fd = in_pipe[0];
  p.stdout_fd = out_pipe[1];
  p.stderr_fd = err_pipe[1];
  p.report_fd = rep_pipe[1];
  p.evidence_fd = ev_pipe[1];
  p.go_fd = go_pipe[0];
  p.root = kWorkloadRoot;
  p.cwd = spec.cwd.c_str();
  p.hostname = spec.hostname.c_str();
  p.hostname_len = spec.hostname.size();
  p.uid = spec.uid;
  p.gid = spec.gid;
  // RLIMIT_NPROC one above pids.max, so that the cgroup limit is the one that bites and is
  // counted (pids.events); uid 0 is exempt from RLIMIT_NPROC anyway.
  p.limits[0] = {RLIMIT_NOFILE, static_cast<rlim_t>(spec.open_files)};
  p.limits[1] = {RLIMIT_NPROC, static_cast<rlim_t>(spec.pids + 1)};
  p.limits[2] = {RLIMIT_FSIZE, static_cast<rlim_t>(spec.disk_bytes)};
  p.limits[3] = {RLIMIT_CORE, 0};
  p.limits[4] = {RLIMIT_CPU, CpuRlimitSeconds(spec.cpu_time_ns)};
  p.seccomp.len = static_cast<unsigned short>(program.size());
  p.seccomp.filter = const_cast<sock_filter*>(program.data());
  p.argv = argv.data();
  p.envp = envp.data();
  p.candidates = cand_ptrs.data();

  int pidfd = -1;
  clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP |
               CLONE_INTO_CGROUP | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(cgroup.dir_fd());
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) ChildMain(p);
  int clone_errno = errno;
  CloseFd(in_pipe[0]);
  CloseFd(out_pipe[1]);
  CloseFd(err_pipe[1]);
  CloseFd(rep_pipe[1]);
  CloseFd(ev_pipe[1]);
  CloseFd(go_pipe[0]);
  if (pid >= 0) ForwardEvidence(ev_pipe[0], go_pipe[1], approve);
  CloseFd(ev_pipe[0]);
  CloseFd(go_pipe[1]);
  if (pid < 0) {
    CloseFd(in_pipe[1]);
    CloseFd(out_pipe[0]);
    CloseFd(err_pipe[0]);
    CloseFd(rep_pipe[0]);
    out.setup_error = std::string("clone3: ") + std::strerror(clone_errno);
    return out;
  }
  Report r{};
  ssize_t n;
  do {
    n = read(rep_pipe[0], &r, sizeof r);
  } while (n < 0 && errno == EINTR);
  CloseFd(rep_pipe[0]);
  if (n == 0) {
    // EOF: the report pipe was closed by a successful execve.
    Spawned s;
    s.pid = static_cast<pid_t>(pid);
    s.pidfd = pidfd;
    s.stdin_fd = in_pipe[1];
    s.stdout_fd = out_pipe[0];
    s.stderr_fd = err_pipe[0];
    out.spawned = s;
    return out;
  }
  // The child failed before exec; reap it.
  siginfo_t si;
  waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &si, WEXITED);
  close(pidfd);
  CloseFd(in_pipe[1]);
  CloseFd(out_pipe[0]);
  CloseFd(err_pipe[0]);
  if (n != sizeof r) {
    out.setup_error = "workload child failed without a report";
    return out;
  }
  std::string what = std::string(StepName(r.step)) + ": " + std::strerror(r.err);
  if (r.step == kStepExec) {
    ExitReport e;
    bool not_found = r.err == ENOENT || r.err == ENOTDIR;
    e.exit_code = not_found ? 127 : 126;
    e.detail = (not_found ? "command not found: " : "command not executable: ") + spec.argv[0] +
               " (" + what + ")";
    out.exec_failure = e;
    return out;
  }
  if (r.step == kStepChdir) {
    out.setup_error = "working directory " + spec.cwd + " unusable: " + std::strerror(r.err);
    return out;
  }
  out.setup_error = "workload setup failed at " + what;
  return out;
}

// Complete memory stall (PSI "full") at memory.max after which the run ends at its memory limit.
constexpr uint64_t kThrashStallUs = 1000 * 1000;

ExitReport Supervise(Spawned s, const microvm::GuestSpec& spec, const WorkloadCgroup& cgroup,
                     Channel& channel, const std::string& stdin_data) {
  ExitReport rep;
  for (int fd : {s.stdout_fd, s.stderr_fd, s.stdin_fd}) {
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  size_t stdin_pos = 0;
  if (s.stdin_fd >= 0 && stdin_data.empty()) CloseFd(s.stdin_fd);

  int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  itimerspec its{};
  its.it_interval.tv_nsec = 50 * 1000 * 1000;  // CPU-time check period
  its.it_value = its.it_interval;
  timerfd_settime(timer, 0, &its, nullptr);

  uint64_t captured = 0;
  bool exited = false;
  bool channel_ok = true;
  uint64_t next_heartbeat = BootTimeNs() + kHeartbeatPeriodNs;
  struct timespec drain_deadline {};
  auto kill_for = [&](GuestLimit l, const std::string& detail) {
    if (rep.limit == GuestLimit::kNone) {
      rep.limit = l;
      rep.detail = detail;
    }
    cgroup.KillAll();
  };

  char buf[microvm::kMaxDataFrame];
  while (s.stdout_fd >= 0 || s.stderr_fd >= 0 || !exited) {
    pollfd fds[5];
    int nfds = 0;
    int i_out = -1, i_err = -1, i_in = -1, i_pid = -1, i_timer;
    if (s.stdout_fd >= 0) fds[i_out = nfds++] = {s.stdout_fd, POLLIN, 0};
    if (s.stderr_fd >= 0) fds[i_err = nfds++] = {s.stderr_fd, POLLIN, 0};
    if (s.stdin_fd >= 0) fds[i_in = nfds++] = {s.stdin_fd, POLLOUT, 0};
    if (!exited) fds[i_pid = nfds++] = {s.pidfd, POLLIN, 0};
    fds[i_timer = nfds++] = {timer, POLLIN, 0};
    if (poll(fds, static_cast<nfds_t>(nfds), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int idx : {i_out, i_err}) {
      if (idx < 0 || fds[idx].revents == 0) continue;
      int& fd = idx == i_out ? s.stdout_fd : s.stderr_fd;
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        CloseFd(fd);
        continue;
      }
      uint64_t& total = idx == i_out ? rep.stdout_total : rep.stderr_total;
      total += static_cast<uint64_t>(n);
      uint64_t room = spec.output_bytes > captured ? spec.output_bytes - captured : 0;
      size_t send = static_cast<size_t>(std::min<uint64_t>(room, static_cast<uint64_t>(n)));
      if (send > 0 && channel_ok) {
        channel_ok = channel.Send(idx == i_out ? FrameType::kStdout : FrameType::kStderr,
                                  std::string_view(buf, send));
      }
      captured += send;
      if (send < static_cast<size_t>(n)) {
        kill_for(GuestLimit::kOutput,
                 "output limit: more than " + std::to_string(spec.output_bytes) + " bytes");
      }
    }
    if (i_in >= 0 && fds[i_in].revents != 0) {
      ssize_t n = write(s.stdin_fd, stdin_data.data() + stdin_pos,
                        std::min<size_t>(stdin_data.size() - stdin_pos, 64 * 1024));
      if (n > 0) stdin_pos += static_cast<size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || stdin_pos == stdin_data.size()) {
        CloseFd(s.stdin_fd);  // EPIPE: the program closed its stdin
      }
    }
    if (i_pid >= 0 && fds[i_pid].revents != 0) {
      siginfo_t si;
      std::memset(&si, 0, sizeof si);
      if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(s.pidfd), &si, WEXITED) == 0) {
        exited = true;
        if (si.si_code == CLD_EXITED) {
          rep.exit_code = si.si_status;
        } else {
          rep.exit_code = -1;
          rep.term_signal = si.si_status;
        }
        // The pid namespace is gone with its init; this kills anything that escaped into the
        // cgroup otherwise, so that the pipes reach EOF.
        cgroup.KillAll();
        CloseFd(s.stdin_fd);
        clock_gettime(CLOCK_MONOTONIC, &drain_deadline);
        drain_deadline.tv_sec += 2;
      }
    }
    if (fds[i_timer].revents != 0) {
      uint64_t ticks;
      (void)!read(timer, &ticks, sizeof ticks);
      // At its memory limit, a program whose pages the kernel keeps reclaiming and reading back
      // (its own code, from the image disks) can thrash for seconds before the OOM killer
      // decides, burning CPU time, so that the CPU limit would fire for what is the memory
      // limit. A second of complete stall on memory (PSI) at memory.max is the memory limit.
      if (!exited && cgroup.MemoryMaxHits() > 0 && cgroup.MemoryFullStallUs() >= kThrashStallUs) {
        kill_for(GuestLimit::kMemory, "memory limit: " + std::to_string(spec.memory_bytes) +
                                          " bytes (thrashing: the program stalled on memory " +
                                          "for over a second at the limit)");
      }
      if (!exited && spec.cpu_time_ns > 0 && cgroup.CpuNs() >= spec.cpu_time_ns) {
        kill_for(GuestLimit::kCpuTime,
                 "cpu time limit: " + std::to_string(spec.cpu_time_ns / 1000000) + " ms");
      }
      if (channel_ok && BootTimeNs() >= next_heartbeat) {
        next_heartbeat = BootTimeNs() + kHeartbeatPeriodNs;
        channel_ok = channel.Send(FrameType::kHeartbeat,
                                  microvm::EncodeHeartbeat(MakeHeartbeat(s.pid, exited, cgroup)));
      }
      if (exited) {
        timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > drain_deadline.tv_sec ||
            (now.tv_sec == drain_deadline.tv_sec && now.tv_nsec >= drain_deadline.tv_nsec)) {
          break;  // a pipe held open by something unkillable: stop waiting for EOF
        }
      }
    }
  }
  CloseFd(s.stdout_fd);
  CloseFd(s.stderr_fd);
  CloseFd(s.stdin_fd);
  close(timer);
  close(s.pidfd);

  rep.cpu_ns = cgroup.CpuNs();
  rep.peak_memory_bytes = cgroup.PeakMemoryBytes();
  rep.oom_kills = cgroup.OomKills();
  rep.fork_failures = cgroup.PidsLimitHits();
  if (rep.limit == GuestLimit::kNone && rep.oom_kills > 0) {
    rep.limit = GuestLimit::kMemory;
    rep.detail = "memory limit: " + std::to_string(spec.memory_bytes) + " bytes (OOM kill)";
  }
  if (rep.limit == GuestLimit::kNone && rep.fork_failures > 0) {
    rep.limit = GuestLimit::kPids;
    rep.detail = "fork failed " + std::to_string(rep.fork_failures) +
                 " times at pids = " + std::to_string(spec.pids);
  }
  return rep;
}

}  // namespace safex::guest
