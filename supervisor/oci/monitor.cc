#include "supervisor/oci/monitor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "common/unique_fd.h"
#include "supervisor/oci/container_run.h"

namespace safex::supervisor::oci {
namespace {

// The signals `safex-oci kill` sends (SIGUSR1 stands for KILL).
sigset_t KillSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1}) sigaddset(&set, s);
  return set;
}

// Reads the kill signals from a signalfd into the cancel flag. Before the run starts, a signal
// also opens exec.fifo for reading: that ends the monitor's wait for `start` (WaitForStart),
// which then sees killed_before_start() and abandons the container without a run. The fifo is
// reopened through an O_PATH descriptor taken at the start, so that this works even when the
// container's directory is gone (a shim or an operator removed it).
class SignalWatcher {
 public:
  SignalWatcher(int fd, const std::string& fifo)
      : fd_(fd), fifo_(open(fifo.c_str(), O_PATH | O_CLOEXEC)), thread_([this] { Loop(); }) {
    thread_.detach();
  }
  const std::atomic<int>* cancel() const { return &cancel_; }
  void RunStarted() { started_ = true; }
  bool killed_before_start() const { return killed_before_start_; }
  // The fifo by its descriptor: the same inode whatever happened to its path since.
  std::string fifo_path() const { return "/proc/self/fd/" + std::to_string(fifo_.get()); }

 private:
  void Loop() {
    for (;;) {
      struct signalfd_siginfo si {};
      if (read(fd_, &si, sizeof si) != static_cast<ssize_t>(sizeof si)) {
        if (errno == EINTR) continue;
        return;
      }
      int sig = si.ssi_signo == SIGUSR1 ? SIGKILL : static_cast<int>(si.ssi_signo);
      int expected = 0;
      cancel_.compare_exchange_strong(expected, sig);
      if (!started_) {
        killed_before_start_ = true;
        std::string self = "/proc/self/fd/" + std::to_string(fifo_.get());
        open(self.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // kept open until the exit
      }
    }
  }
  int fd_;
  UniqueFd fifo_;
  std::atomic<int> cancel_{0};
  std::atomic<bool> started_{false}, killed_before_start_{false};
  std::thread thread_;
};

// Passes the program's output on to the shim's stdio (fds 1 and 2) from a thread of its own:
// the driver's observer must never block on a slow reader. Bounded: the driver passes no more
// than the plan's output cap.
class Forwarder {
 public:
  Forwarder() : thread_([this] { Loop(); }) {}
  ~Forwarder() { Finish(); }
  void Push(int which, std::string_view bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(which == 0 ? STDOUT_FILENO : STDERR_FILENO, std::string(bytes));
    cv_.notify_one();
  }
  // Writes what is queued, then returns.
  void Finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return done_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto [fd, bytes] = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      WriteAll(fd, bytes);
      lock.lock();
    }
  }
  static void WriteAll(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = write(fd, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // the shim's end is gone: the run goes on, its record keeps digests
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int, std::string>> queue_;
  bool done_ = false;
  std::thread thread_;
};

// Blocks until `start` opens the fifo for reading (or the watcher does, on a kill), then hands
// it the byte it waits for. False: killed before start, or the fifo is gone.
bool WaitForStart(const SignalWatcher& signals) {
  int fd = open(signals.fifo_path().c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  UniqueFd owner(fd);
  if (signals.killed_before_start()) return false;
  return write(fd, "0", 1) == 1;
}

// The verdict for kubelet (terminationMessagePath's host file) and for the container's log.
void Report(const MonitorArgs& a, const RunReport& r, const std::string& termination_log) {
  std::string message = TerminationMessage(r);
  a.log.Info(a.id + ": " + message);
  if (!termination_log.empty()) {
    // A regular, empty file (kubelet makes it for each container): never another host file a
    // pod's volume might have put at that path (O_NOFOLLOW, no O_CREAT, the size checked).
    int fd = open(termination_log.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st {};
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0) {
      ssize_t ignored = write(fd, message.data(), message.size());
      (void)ignored;
    } else {
      a.log.Warning(a.id + ": termination message not written to " + termination_log);
    }
    if (fd >= 0) close(fd);
  }
  if (r.verdict == Verdict::kOk || r.verdict == Verdict::kNonzeroExit) return;
  std::string line = "safex: " + std::string(VerdictName(r.verdict));
  if (!r.limits_fired.empty()) line += " (limit: " + r.limits_fired.front() + ")";
  if (!r.reason.empty()) line += ": " + r.reason;
  if (!r.run_id.empty()) line += " [run " + r.run_id + "]";
  line += "\n";
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace

void RunMonitor(const MonitorArgs& a, int ready_fd) {
  // The kill signals are blocked (create blocked them before the fork) and read from a signalfd;
  // a write to a fifo whose reader went away is an error, not a SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  sigset_t set = KillSignals();
  int sfd = signalfd(-1, &set, SFD_CLOEXEC);
  if (sfd < 0) _exit(kExitRefused);
  SignalWatcher signals(sfd, a.dir + "/exec.fifo");
  ssize_t ignored = write(ready_fd, "1", 1);
  (void)ignored;
  close(ready_fd);

  int status = 0;
  {
    ContainerRun run(a);
    run.Prepare(signals.cancel());
    if (!WaitForStart(signals)) {
      run.Abandon("the container was killed or deleted before it started");
      int sig = signals.cancel()->load();
      status = 128 + (sig != 0 ? sig : SIGKILL);
    } else {
      signals.RunStarted();
      RunReport report;
      {
        Forwarder out;
        report = run.Run(signals.cancel(),
                         [&out](int which, std::string_view b) { out.Push(which, b); });
      }  // every byte of output is written before the verdict
      Report(a, report, run.termination_log());
      status = report.exit_status;
    }
  }  // the container's cgroup is removed, run or not
  _exit(status);
}

}  // namespace safex::supervisor::oci
