// Step 7 of a gVisor run (run_steps.h): supervising `runsc run` from outside until every process
// of the run is gone. One poll loop over: the program's stdout/stderr files (inotify), runsc's
// debug log and diagnostics pipes, the stdin pipe, runsc's pidfd; with the wall deadline, and
// every poll_interval the cgroup's CPU time and OOM-kill counter. A limit that fires stops the
// sandbox at once (RunState::StopSandbox) and is remembered as the reason.
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <string_view>
#include <vector>

#include "drivers/gvisor/run_steps.h"

namespace safex::drivers::gvisor {
namespace {

using Clock = std::chrono::steady_clock;

class Supervisor {
 public:
  Supervisor(const RunContext& c, RunIo& io, RunState& s, RunResult* result)
      : c_(c),
        io_(io),
        s_(s),
        result_(result),
        capture_(&result->stdout_stream, &result->stderr_stream, c.plan.limits.output_bytes,
                 &c.req.on_output) {
    static const std::string kNoStdin;
    stdin_ = c.req.stdin_data ? &*c.req.stdin_data : &kNoStdin;  // not copied
    if (io_.stdin_pipe && stdin_->empty()) io_.stdin_pipe->write.Reset();
    const gvisor::LoggedSyscalls logged = SyscallsToLog(c.plan.seccomp);
    scanner_.SetLogged(std::set<std::string>(logged.names.begin(), logged.names.end()), logged.all);
  }

  Observation Run() {
    // What a pooled sandbox's runsc wrote while it waited comes first, in order.
    scanner_.Feed(io_.idle_log);
    diag_ = io_.idle_diag.substr(0, c_.options.diagnostics_cap);
    const auto start = Clock::now();
    deadline_ = start + std::chrono::nanoseconds(c_.plan.limits.wall_time_ns);
    next_poll_ = start + c_.options.poll_interval;
    while (!s_.runsc.reaped() && PollOnce()) {
      CheckLimits();
    }
    const auto end = Clock::now();
    if (io_.stdin_pipe) io_.stdin_pipe->write.Reset();
    // Every process of the run is gone (or is made so now); drain what they wrote.
    s_.StopSandbox(c_.options.kill_grace);
    Drain();
    if (!o_.stopped_for && capture_.exceeded()) {
      Stop(LimitHit::kOutput, OutputLimitDetail());
    }
    result_->wall_ns = static_cast<uint64_t>(std::chrono::nanoseconds(end - start).count());
    result_->fork_failures = scanner_.fork_eagain();
    result_->logged_syscalls = scanner_.logged();
    o_.fork_failures = scanner_.fork_eagain();
    if (auto app = scanner_.app_exit()) o_.app_exit = *app;
    o_.app_started = scanner_.app_started();
    o_.runsc_error = LastLine(diag_);
    o_.runsc_reaped = s_.runsc.reaped();
    o_.runsc = o_.runsc_reaped ? s_.runsc.KillAndWait() : ExitStatus{};
    return o_;
  }

 private:
  enum Kind { kLog, kDiag, kStdio, kStdin, kRunsc };

  // One poll of every source; false when supervision cannot go on (poll failed).
  bool PollOnce() {
    std::vector<pollfd> pfds;
    std::vector<Kind> kinds;
    auto add = [&](int fd, short events, Kind k) {
      pfds.push_back({fd, events, 0});
      kinds.push_back(k);
    };
    if (io_.log.read.valid()) add(io_.log.read.get(), POLLIN, kLog);
    if (io_.diag.read.valid()) add(io_.diag.read.get(), POLLIN, kDiag);
    add(s_.stdio.notify_fd(), POLLIN, kStdio);
    if (io_.stdin_pipe && io_.stdin_pipe->write.valid()) {
      add(io_.stdin_pipe->write.get(), POLLOUT, kStdin);
    }
    add(s_.runsc.pidfd(), POLLIN, kRunsc);
    const auto now = Clock::now();
    const auto wake =
        o_.stopped_for ? now + std::chrono::milliseconds(50) : std::min(deadline_, next_poll_);
    const int timeout = static_cast<int>(std::clamp<int64_t>(
        std::chrono::ceil<std::chrono::milliseconds>(wake - now).count(), 0, INT_MAX));
    int n = poll(pfds.data(), pfds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      Stop(LimitHit::kNone, "");
      s_.Note("poll", Status::Errno("poll", errno));
      return false;
    }
    for (size_t i = 0; n > 0 && i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      switch (kinds[i]) {
        case kLog:
          ReadPipe(io_.log.read, true);
          break;
        case kDiag:
          ReadPipe(io_.diag.read, false);
          break;
        case kStdio:
          ReadStdio();
          break;
        case kStdin:
          FeedStdin();
          break;
        case kRunsc:
          s_.runsc.TryWait().ok();
          break;
      }
    }
    return true;
  }

  // The limits the supervisor enforces from outside, after each poll.
  void CheckLimits() {
    const plan::Limits& lim = c_.plan.limits;
    if (capture_.exceeded()) Stop(LimitHit::kOutput, OutputLimitDetail());
    const auto now = Clock::now();
    if (!o_.stopped_for && now >= deadline_) {
      Stop(LimitHit::kWallTime,
           fmt::format("wall time limit of {} ms reached", lim.wall_time_ns / 1000000));
    }
    if (!o_.stopped_for && now >= next_poll_) {
      CheckAccounting();
      next_poll_ = now + c_.options.poll_interval;
    }
    if (!o_.stopped_for && c_.req.cancel != nullptr &&
        c_.req.cancel->load(std::memory_order_relaxed) != 0) {
      o_.cancelled = true;
      Stop(LimitHit::kNone, "");
    }
  }

  void CheckAccounting() {
    const plan::Limits& lim = c_.plan.limits;
    auto cpu = s_.cg.CpuUsageNs();
    const uint64_t used = cpu.ok() && *cpu > s_.cpu_baseline_ns ? *cpu - s_.cpu_baseline_ns : 0;
    if (cpu.ok() && used >= lim.cpu_time_ns) {
      Stop(LimitHit::kCpuTime, fmt::format("CPU time {} ms reached the limit of {} ms",
                                           used / 1000000, lim.cpu_time_ns / 1000000));
      return;
    }
    auto oom = s_.cg.OomKills();
    if (oom.ok() && *oom > 0) {
      Stop(LimitHit::kMemory,
           fmt::format("OOM-killed at the memory limit of {} bytes (cgroup oom_kill = {})",
                       lim.memory_bytes, *oom));
    }
  }

  void Stop(LimitHit why, std::string what) {
    if (o_.stopped_for) return;
    o_.stopped_for = why;
    o_.stop_detail = std::move(what);
    s_.StopSandbox(c_.options.kill_grace);
  }

  std::string OutputLimitDetail() const {
    return fmt::format("stdout + stderr exceeded the output limit of {} bytes",
                       c_.plan.limits.output_bytes);
  }

  bool ReadStdio() {
    return s_.stdio.Read([this](int which, std::string_view bytes) {
      capture_.Add(which, bytes.data(), bytes.size());
    });
  }

  void ReadPipe(UniqueFd& fd, bool is_log) {
    ReadRunscPipe(fd, is_log ? &scanner_ : nullptr, &diag_, c_.options.diagnostics_cap);
  }

  void FeedStdin() {
    Pipe& p = *io_.stdin_pipe;
    ssize_t w = write(p.write.get(), stdin_->data() + stdin_off_,
                      std::min<size_t>(stdin_->size() - stdin_off_, 65536));
    if (w > 0) stdin_off_ += static_cast<size_t>(w);
    // Done, or the program closed its stdin (EPIPE): either way no more input.
    if ((w < 0 && errno != EAGAIN && errno != EINTR) || stdin_off_ >= stdin_->size()) {
      p.write.Reset();
    }
  }

  // After the run: the rest of the program's files, then the pipes until their writers are gone
  // (at most 2 s: a process holding one open is killed with the cgroup already).
  void Drain() {
    while (!capture_.exceeded() && ReadStdio()) {
    }
    const auto until = Clock::now() + std::chrono::milliseconds(2000);
    while (Clock::now() < until && (io_.log.read.valid() || io_.diag.read.valid())) {
      std::vector<pollfd> pfds;
      if (io_.log.read.valid()) pfds.push_back({io_.log.read.get(), POLLIN, 0});
      if (io_.diag.read.valid()) pfds.push_back({io_.diag.read.get(), POLLIN, 0});
      if (poll(pfds.data(), pfds.size(), 100) < 0 && errno != EINTR) break;
      ReadPipe(io_.log.read, true);
      ReadPipe(io_.diag.read, false);
    }
    scanner_.Finish();
  }

  const RunContext& c_;
  RunIo& io_;
  RunState& s_;
  RunResult* result_;
  OutputCapture capture_;
  SandboxLogScanner scanner_;
  Observation o_;
  std::string diag_;
  const std::string* stdin_ = nullptr;
  size_t stdin_off_ = 0;
  Clock::time_point deadline_;
  Clock::time_point next_poll_;
};

}  // namespace

void ReadRunscPipe(UniqueFd& fd, SandboxLogScanner* scanner, std::string* diag, size_t cap) {
  char buf[64 * 1024];
  for (int rounds = 0; fd.valid() && rounds < 16; ++rounds) {
    const ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) fd.Reset();
      return;
    }
    if (n == 0) {
      fd.Reset();
      return;
    }
    const std::string_view data(buf, static_cast<size_t>(n));
    if (scanner != nullptr) {
      scanner->Feed(data);
    } else if (diag->size() < cap) {
      diag->append(data.substr(0, cap - diag->size()));
    }
  }
}

Observation Supervise(const RunContext& c, RunIo& io, RunState& s, RunResult* result) {
  return Supervisor(c, io, s, result).Run();
}

}  // namespace safex::drivers::gvisor
