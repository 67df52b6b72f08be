// One command of a gVisor session (session_sandbox.h): sent to the sandbox's init as an 'x'
// frame (launch/session.c), supervised from outside until its answer, and judged as a cold run
// is. The order matters:
//   1. the baselines: the cgroup's CPU and counters so far are earlier commands', and the output
//      files' read position is where the last command's output ended;
//   2. the command is sent; the wall clock starts;
//   3. one poll loop over the output files (inotify), runsc's pipes, the answer pipe and runsc's
//      pidfd, with the wall deadline and the cgroup's CPU and OOM counters every poll_interval;
//      a limit or a cancel sends 'k' (the launcher kills every process but itself), and the
//      whole sandbox is stopped when no answer follows within the kill grace;
//   4. the answer comes only once every process of the command is gone, so what the output files
//      hold then is all of the command's: read to the end, then their space freed for the next;
//   5. the outcome: the limit the host stopped it for, else the wait status the init reported,
//      then the counters (drivers/counted_limits.h).
#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <vector>

#include "drivers/counted_limits.h"
#include "drivers/gvisor/session_sandbox.h"

namespace safex::drivers::gvisor {
namespace {

using Clock = std::chrono::steady_clock;

// The cgroup's counters before the command: what the whole session used so far.
struct Baseline {
  uint64_t cpu_ns = 0;
  uint64_t oom_kills = 0;
  uint64_t pids_hits = 0;
};

Baseline ReadBaseline(RunState& s) {
  Baseline b;
  if (auto v = s.cg.CpuUsageNs(); v.ok()) b.cpu_ns = *v;
  if (auto v = s.cg.OomKills(); v.ok()) b.oom_kills = *v;
  if (auto v = s.cg.PidsLimitHits(); v.ok()) b.pids_hits = *v;
  // Where the kernel has no reset (v2) the peak keeps the session's: larger, never smaller.
  s.cg.ResetPeakMemory().ok();
  return b;
}

// The 'x' frame's payload (launch/session.c): stdin, the working directory, the variables that
// change the session's environment (0xffffffff: none), argv.
std::string ExecMessage(const RunRequest& req) {
  std::string payload(1, req.stdin_data ? 'd' : 'n');
  PutU32(&payload, req.stdin_data ? static_cast<uint32_t>(req.stdin_data->size()) : 0);
  if (req.stdin_data) payload += *req.stdin_data;
  payload += req.choices.cwd;
  payload.push_back('\0');
  const auto& env = req.choices.env;
  PutU32(&payload, env ? static_cast<uint32_t>(env->size()) : 0xffffffffu);
  if (env) {
    for (const auto& [name, value] : *env) {
      payload += name + "=" + value;
      payload.push_back('\0');
    }
  }
  for (const std::string& a : req.argv) {
    payload += a;
    payload.push_back('\0');
  }
  return payload;
}

class CommandSupervisor {
 public:
  CommandSupervisor(SessionParts& p, const RunRequest& req, RunResult* result)
      : p_(p),
        s_(*p.state),
        req_(req),
        result_(result),
        capture_(&result->stdout_stream, &result->stderr_stream, p.plan.limits.output_bytes,
                 &req.on_output) {
    const LoggedSyscalls logged = SyscallsToLog(p.plan.seccomp);
    scanner_.SetLogged(std::set<std::string>(logged.names.begin(), logged.names.end()), logged.all);
  }

  // 1-2: baselines, the command.
  Status Start() {
    DrainIdle(p_);
    Release();
    base_ = ReadBaseline(s_);
    SAFEX_RETURN_IF_ERROR(p_.wire.Send('x', ExecMessage(req_), std::chrono::milliseconds(10000)));
    start_ = Clock::now();
    deadline_ = start_ + std::chrono::nanoseconds(WallTimeNs());
    next_poll_ = start_ + p_.options->poll_interval;
    return Status::Ok();
  }

  // 3-4: until the answer, or the sandbox is gone.
  void Supervise() {
    while (!answer_ && !p_.dead && PollOnce()) {
      CheckLimits();
      CheckKillAnswered();
    }
    result_->wall_ns =
        static_cast<uint64_t>(std::chrono::nanoseconds(Clock::now() - start_).count());
    if (p_.dead) s_.StopSandbox(p_.options->kill_grace);
    while (!capture_.exceeded() && ReadStdio()) {
    }
    if (!stopped_for_ && capture_.exceeded()) Stop(LimitHit::kOutput, OutputLimitDetail());
    scanner_.Finish();
    Release();
  }

  // 5. The outcome and the figures.
  void Judge() {
    const Baseline now = ReadBaseline(s_);
    result_->cpu_ns = now.cpu_ns > base_.cpu_ns ? now.cpu_ns - base_.cpu_ns : 0;
    if (auto peak = s_.cg.PeakMemoryBytes(); peak.ok()) result_->peak_memory_bytes = *peak;
    if (s_.net) result_->denied_egress = s_.net->DeniedCount();
    result_->fork_failures = scanner_.fork_eagain();
    result_->logged_syscalls = scanner_.logged();
    ProgramEnd end;
    if (cancelled_) {
      result_->interrupted = true;
      end.term_signal = SIGKILL;
    } else if (stopped_for_) {
      end.limit = *stopped_for_;
      end.limit_detail = stop_detail_;
      end.term_signal = SIGKILL;
    } else if (answer_) {
      FromAnswer(&end);
    } else {
      result_->backend_error = SandboxGone();
    }
    CountedLimits c;
    c.oom_kills = now.oom_kills - base_.oom_kills;
    c.pids_hits = now.pids_hits - base_.pids_hits;
    c.pids_max = s_.pids_backstop;
    c.pids_is_backstop = true;
    c.fork_failures = scanner_.fork_eagain();
    c.full_outputs = s_.outputs.Full(p_.plan);
    if (!cancelled_) ApplyCountedLimits(c, p_.plan.limits, &end);
    result_->exit_code = end.exit_code;
    result_->term_signal = end.term_signal;
    result_->limit = end.limit;
    result_->limit_detail = end.limit_detail;
    if (left_behind_ > 0 && end.limit_detail.empty()) {
      result_->limit_detail = fmt::format(
          "{} process(es) the command left running were killed when it ended", left_behind_);
    }
  }

 private:
  enum Kind { kLog, kDiag, kStdio, kAnswer, kRunsc };

  // The session's wall time, or the shorter one the caller chose for this command.
  uint64_t WallTimeNs() const {
    const uint64_t plan = p_.plan.limits.wall_time_ns;
    const uint64_t chosen = req_.choices.wall_time_ns;
    return chosen != 0 && chosen < plan ? chosen : plan;
  }

  bool PollOnce() {
    std::vector<pollfd> pfds;
    std::vector<Kind> kinds;
    auto add = [&](int fd, Kind k) {
      if (fd < 0) return;
      pfds.push_back({fd, POLLIN, 0});
      kinds.push_back(k);
    };
    add(p_.io.log.read.get(), kLog);
    add(p_.io.diag.read.get(), kDiag);
    add(s_.stdio.notify_fd(), kStdio);
    add(p_.wire.answers_fd(), kAnswer);
    add(s_.runsc.pidfd(), kRunsc);
    const auto now = Clock::now();
    // Once the kill is sent, the deadline that sent it no longer wakes the loop.
    const auto wake = std::min(kill_deadline_ ? *kill_deadline_ : deadline_, next_poll_);
    const int timeout = static_cast<int>(std::clamp<int64_t>(
        std::chrono::ceil<std::chrono::milliseconds>(wake - now).count(), 0, INT_MAX));
    const int n = poll(pfds.data(), pfds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      p_.dead = true;  // it cannot be supervised: it must not go on
      return false;
    }
    for (size_t i = 0; n > 0 && i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) Handle(kinds[i]);
    }
    return true;
  }

  void Handle(Kind k) {
    switch (k) {
      case kLog:
        ReadPipe(p_.io.log.read, true);
        break;
      case kDiag:
        ReadPipe(p_.io.diag.read, false);
        break;
      case kStdio:
        ReadStdio();
        break;
      case kAnswer:
        TakeAnswer();
        break;
      case kRunsc:
        s_.runsc.TryWait().ok();
        if (s_.runsc.reaped()) p_.dead = true;
        break;
    }
  }

  void TakeAnswer() {
    const bool open = p_.wire.Pump();
    if (std::optional<SessionFrame> f = p_.wire.Next()) {
      if (f->kind == 'x' && f->payload.size() == 12) {
        answer_ = std::move(f->payload);
        return;
      }
      p_.dead = true;  // not the protocol: nothing more of it is believed
    }
    if (!open) p_.dead = true;
  }

  void CheckLimits() {
    if (capture_.exceeded()) Stop(LimitHit::kOutput, OutputLimitDetail());
    const auto now = Clock::now();
    if (now >= deadline_ && !kill_deadline_) {
      Stop(LimitHit::kWallTime,
           fmt::format("wall time limit of {} ms reached", WallTimeNs() / 1000000));
    }
    if (now >= next_poll_) {
      CheckAccounting();
      next_poll_ = now + p_.options->poll_interval;
    }
    if (req_.cancel != nullptr && req_.cancel->load(std::memory_order_relaxed) != 0 &&
        !stopped_for_) {
      cancelled_ = true;
      Stop(LimitHit::kNone, "");
    }
  }

  void CheckAccounting() {
    auto cpu = s_.cg.CpuUsageNs();
    const uint64_t used = cpu.ok() && *cpu > base_.cpu_ns ? *cpu - base_.cpu_ns : 0;
    if (used >= p_.plan.limits.cpu_time_ns) {
      Stop(LimitHit::kCpuTime, fmt::format("CPU time {} ms reached the limit of {} ms",
                                           used / 1000000, p_.plan.limits.cpu_time_ns / 1000000));
    }
    auto oom = s_.cg.OomKills();
    if (oom.ok() && *oom > base_.oom_kills) {
      // The sandbox's memory is the session's: an OOM kill may have hit anything in it.
      Stop(LimitHit::kMemory,
           fmt::format("OOM-killed at the memory limit of {} bytes (cgroup oom_kill = {})",
                       p_.plan.limits.memory_bytes, *oom - base_.oom_kills));
      p_.dead = true;
    }
  }

  // The first limit to fire is the reason; the launcher is told to kill the command's processes.
  void Stop(LimitHit why, std::string what) {
    if (stopped_for_ || kill_deadline_) return;
    if (why != LimitHit::kNone) {
      stopped_for_ = why;
      stop_detail_ = std::move(what);
    }
    kill_deadline_ = Clock::now() + p_.options->kill_grace;
    if (!p_.wire.Send('k', "", std::chrono::milliseconds(1000)).ok()) p_.dead = true;
  }

  // A launcher that does not answer a kill in time is not believed any more: the sandbox goes.
  void CheckKillAnswered() {
    if (kill_deadline_ && !answer_ && Clock::now() >= *kill_deadline_) p_.dead = true;
  }

  void FromAnswer(ProgramEnd* end) {
    const int status = static_cast<int>(GetU32(*answer_, 0));
    left_behind_ = GetU32(*answer_, 4);
    const uint32_t fork_errno = GetU32(*answer_, 8);
    if (fork_errno != 0) {
      result_->backend_error = fmt::format("the session's init could not fork the command: {}",
                                           std::strerror(static_cast<int>(fork_errno)));
      end->exit_code = 126;
    } else if (WIFEXITED(status)) {
      end->exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      end->term_signal = WTERMSIG(status);
    }
  }

  std::string SandboxGone() {
    s_.runsc.TryWait().ok();
    std::string diag = p_.io.idle_diag;
    return fmt::format("the session's sandbox ended during the command{}",
                       LastLine(diag).empty() ? "" : ": " + LastLine(diag));
  }

  std::string OutputLimitDetail() const {
    return fmt::format("stdout + stderr exceeded the output limit of {} bytes",
                       p_.plan.limits.output_bytes);
  }

  bool ReadStdio() {
    return s_.stdio.Read([this](int which, std::string_view bytes) {
      capture_.Add(which, bytes.data(), bytes.size());
    });
  }

  void Release() {
    Status st = s_.stdio.Release();
    if (!st.ok()) s_.Note("stdio release", st);
  }

  void ReadPipe(UniqueFd& fd, bool is_log) {
    ReadRunscPipe(fd, is_log ? &scanner_ : nullptr, &p_.io.idle_diag, p_.options->diagnostics_cap);
  }

  SessionParts& p_;
  RunState& s_;
  const RunRequest& req_;
  RunResult* result_;
  OutputCapture capture_;
  SandboxLogScanner scanner_;
  Baseline base_;
  Clock::time_point start_;
  Clock::time_point deadline_;
  Clock::time_point next_poll_;
  std::optional<Clock::time_point> kill_deadline_;
  std::optional<LimitHit> stopped_for_;
  std::string stop_detail_;
  bool cancelled_ = false;
  std::optional<std::string> answer_;
  uint32_t left_behind_ = 0;
};

}  // namespace

Result<RunResult> ExecCommand(SessionParts& p, const RunRequest& req) {
  if (req.argv.empty() || req.argv[0].empty()) return Status::InvalidArgument("argv is empty");
  if (req.argv.size() > 64 * 1024) {
    return Status::InvalidArgument("a session command takes at most 65536 arguments");
  }
  if (req.choices.env && req.choices.env->size() > 4096) {
    return Status::InvalidArgument("a session command's environment holds at most 4096 names");
  }
  if (req.choices.cwd.find('\0') != std::string::npos) {
    return Status::InvalidArgument("a working directory holds no NUL");
  }
  if (req.choices.env) {
    for (const auto& [name, value] : *req.choices.env) {
      if (name.empty() || name.find_first_of(std::string("=\0", 2)) != std::string::npos ||
          value.find('\0') != std::string::npos) {
        return Status::InvalidArgument("bad environment variable name or value: '" + name + "'");
      }
    }
  }
  if (!req.input_dir.empty()) {
    return Status::InvalidArgument("a session command takes no input directory (write files)");
  }
  if (req.stdin_data && req.stdin_data->size() > kMaxSessionPayloadBytes) {
    return Status::ResourceExhausted("a session command's stdin holds at most 16 MiB");
  }
  size_t argv_bytes = 0;
  for (const std::string& a : req.argv) argv_bytes += a.size() + 1;
  if (argv_bytes > 4 * 1024 * 1024) {
    return Status::InvalidArgument("a session command's argv holds at most 4 MiB");
  }
  RunResult result;
  result.backend_mode = p.backend_mode;
  CommandSupervisor sup(p, req, &result);
  SAFEX_RETURN_IF_ERROR(sup.Start());
  sup.Supervise();
  sup.Judge();
  return result;
}

}  // namespace safex::drivers::gvisor
