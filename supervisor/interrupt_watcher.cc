#include "supervisor/interrupt_watcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace safex::supervisor {

Result<std::unique_ptr<InterruptWatcher>> InterruptWatcher::Start() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  if (int e = pthread_sigmask(SIG_BLOCK, &set, nullptr); e != 0) {
    return Status::Errno("pthread_sigmask", e);
  }
  std::unique_ptr<InterruptWatcher> w(new InterruptWatcher());
  w->signal_fd_.Reset(signalfd(-1, &set, SFD_CLOEXEC));
  if (!w->signal_fd_) return Status::Errno("signalfd", errno);
  w->stop_fd_.Reset(eventfd(0, EFD_CLOEXEC));
  if (!w->stop_fd_) return Status::Errno("eventfd", errno);
  try {
    w->thread_ = std::thread([raw = w.get()] { raw->Loop(); });
  } catch (const std::system_error& e) {
    return Status::Internal(std::string("starting the signal watcher: ") + e.what());
  }
  return w;
}

InterruptWatcher::~InterruptWatcher() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    ssize_t n = write(stop_fd_.get(), &one, sizeof(one));
    (void)n;
    thread_.join();
  }
}

void InterruptWatcher::Loop() {
  for (;;) {
    pollfd pfds[2] = {{signal_fd_.get(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
    if (poll(pfds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (pfds[1].revents != 0) return;
    if (pfds[0].revents != 0) {
      signalfd_siginfo si{};
      if (read(signal_fd_.get(), &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
        int expected = 0;
        signal_.compare_exchange_strong(expected, static_cast<int>(si.ssi_signo));
      }
    }
  }
}

}  // namespace safex::supervisor
