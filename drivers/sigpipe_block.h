// SIGPIPE from writing a run's stdin pipe after the program closed it must not end the
// supervisor: blocked in this thread for the run (the write fails with EPIPE instead), and what
// was raised meanwhile is swallowed before the mask is restored.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <ctime>

namespace safex::drivers {

class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &s, &saved_);
  }
  ~SigpipeBlock() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    timespec zero{0, 0};
    while (sigtimedwait(&s, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t saved_;
};

}  // namespace safex::drivers
