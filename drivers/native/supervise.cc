// Step 8 of a native run: supervision from outside the sandbox until the program is gone.
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "drivers/native/run_steps.h"
#include "drivers/output_capture.h"

namespace safex::drivers::native {
namespace {

using Clock = std::chrono::steady_clock;

// After the program's exit, how long whatever still holds a pipe (nothing of the run can: its
// pid namespace died with it) may keep it open before capture stops waiting for EOF.
constexpr std::chrono::seconds kDrain{2};

class Supervisor {
 public:
  Supervisor(const RunContext& c, RunIo& io, RunState& s, RunResult* result)
      : c_(c),
        io_(io),
        s_(s),
        capture_(&result->stdout_stream, &result->stderr_stream, c.plan.limits.output_bytes,
                 &c.req.on_output) {}

  Observation Run() {
    start_ = Clock::now();
    deadline_ = start_ + std::chrono::nanoseconds(c_.plan.limits.wall_time_ns);
    if (io_.stdin_w && (!c_.req.stdin_data || c_.req.stdin_data->empty())) io_.stdin_w.Reset();
    while (io_.stdout_r || io_.stderr_r || !exited_) {
      PollOnce();
      if (exited_ && Clock::now() >= drain_until_) break;  // see kDrain
      if (!exited_) CheckLimits();
    }
    wall_ns_ = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count());
    return o_;
  }
  uint64_t wall_ns() const { return wall_ns_; }

 private:
  void Stop(LimitHit limit, std::string why) {
    if (!o_.stopped_for && !o_.cancelled) {
      o_.stopped_for = limit;
      o_.stop_detail = std::move(why);
    }
    s_.KillAll();
    NoteExit();
  }

  void NoteExit() {
    if (exited_) return;
    Subprocess& p = s_.sandbox.process();
    auto st = p.TryWait();
    if (!st.ok() || !st->has_value()) return;
    o_.exit = **st;
    exited_ = true;
    // Its pid namespace died with it; anything else of the run in the cgroup goes now.
    s_.KillAll();
    drain_until_ = Clock::now() + kDrain;
  }

  void PollOnce() {
    pollfd fds[4];
    nfds_t n = 0;
    int i_out = -1, i_err = -1, i_in = -1, i_pid = -1;
    if (io_.stdout_r) fds[i_out = static_cast<int>(n++)] = {io_.stdout_r.get(), POLLIN, 0};
    if (io_.stderr_r) fds[i_err = static_cast<int>(n++)] = {io_.stderr_r.get(), POLLIN, 0};
    if (io_.stdin_w) fds[i_in = static_cast<int>(n++)] = {io_.stdin_w.get(), POLLOUT, 0};
    if (!exited_) fds[i_pid = static_cast<int>(n++)] = {s_.sandbox.process().pidfd(), POLLIN, 0};
    const int timeout = static_cast<int>(c_.options.poll_interval.count());
    if (poll(fds, n, timeout) < 0 && errno != EINTR) return;
    for (int idx : {i_out, i_err}) {
      if (idx >= 0 && fds[idx].revents != 0) ReadOutput(idx == i_out ? 0 : 1);
    }
    if (i_in >= 0 && fds[i_in].revents != 0) FeedStdin();
    if (i_pid >= 0 && fds[i_pid].revents != 0) NoteExit();
  }

  void ReadOutput(int which) {
    UniqueFd& fd = which == 0 ? io_.stdout_r : io_.stderr_r;
    char buf[65536];
    const ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      fd.Reset();
      return;
    }
    capture_.Add(which, buf, static_cast<size_t>(n));
    if (capture_.exceeded()) {
      Stop(LimitHit::kOutput,
           fmt::format("output limit: more than {} bytes", c_.plan.limits.output_bytes));
    }
  }

  void FeedStdin() {
    const std::string& data = *c_.req.stdin_data;
    const size_t chunk = std::min<size_t>(data.size() - stdin_pos_, 65536);
    const ssize_t n = write(io_.stdin_w.get(), data.data() + stdin_pos_, chunk);
    if (n > 0) stdin_pos_ += static_cast<size_t>(n);
    // EPIPE: the program closed its stdin (SIGPIPE is not ours: the write fails instead).
    if ((n < 0 && errno != EAGAIN && errno != EINTR) || stdin_pos_ == data.size()) {
      io_.stdin_w.Reset();
    }
  }

  void CheckLimits() {
    if (c_.req.cancel != nullptr && c_.req.cancel->load(std::memory_order_relaxed) != 0) {
      o_.cancelled = true;
      s_.KillAll();
      NoteExit();
      return;
    }
    const plan::Limits& lim = c_.plan.limits;
    if (auto cpu = s_.cg.CpuUsageNs(); cpu.ok() && *cpu >= lim.cpu_time_ns) {
      Stop(LimitHit::kCpuTime, fmt::format("cpu time limit: {} ms", lim.cpu_time_ns / 1000000));
      return;
    }
    if (Clock::now() >= deadline_) {
      Stop(LimitHit::kWallTime, fmt::format("wall time limit: {} ms", lim.wall_time_ns / 1000000));
    }
  }

  const RunContext& c_;
  RunIo& io_;
  RunState& s_;
  OutputCapture capture_;
  Observation o_;
  Clock::time_point start_, deadline_, drain_until_;
  size_t stdin_pos_ = 0;
  bool exited_ = false;
  uint64_t wall_ns_ = 0;
};

}  // namespace

Observation Supervise(const RunContext& c, RunIo& io, RunState& s, RunResult* result) {
  Supervisor sup(c, io, s, result);
  Observation o = sup.Run();
  result->wall_ns = sup.wall_ns();
  return o;
}

}  // namespace safex::drivers::native
