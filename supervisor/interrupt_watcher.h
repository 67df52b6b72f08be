// Turns SIGINT, SIGTERM and SIGHUP into a run's cancellation flag (RunSpec::cancel), so that a
// Ctrl-C of `safex run` (or a stop of the daemon) kills and removes the sandbox and records the
// run as interrupted instead of leaving it behind.
//
// Start() blocks those signals in the calling thread; call it before any other thread exists so
// every thread inherits the mask (then no thread is ended by them). A watcher thread reads them
// from a signalfd; the first one sets flag() to its number. Children started through
// common/subprocess reset their mask, so they are unaffected. The signals stay blocked after the
// watcher is destroyed (the process is about to report and exit).
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::supervisor {

class InterruptWatcher {
 public:
  static Result<std::unique_ptr<InterruptWatcher>> Start();
  ~InterruptWatcher();  // stops and joins the watcher thread
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  // 0 until a signal arrived, then its number (the first one).
  const std::atomic<int>* flag() const { return &signal_; }
  int signal() const { return signal_.load(); }

 private:
  InterruptWatcher() = default;
  void Loop();

  std::atomic<int> signal_{0};
  UniqueFd signal_fd_;
  UniqueFd stop_fd_;  // eventfd: written by the destructor to end the loop
  std::thread thread_;
};

}  // namespace safex::supervisor
