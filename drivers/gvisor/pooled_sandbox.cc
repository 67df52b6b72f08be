#include "drivers/gvisor/pooled_sandbox.h"

#include <unistd.h>

#include <cerrno>

namespace safex::drivers::gvisor {
namespace {

// What idling may keep of runsc's output. Past it the oldest whole lines go: supervision only
// needs what comes after the hand-over, and a partial line would confuse the log's scanner.
constexpr size_t kIdleKeep = 256 * 1024;

// Reads what `fd` has now into `into`; false at EOF or on an error (the writer is gone).
bool DrainInto(UniqueFd& fd, std::string* into) {
  char buf[16384];
  while (fd.valid()) {
    const ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) {
      fd.Reset();
      return false;
    }
    into->append(buf, static_cast<size_t>(n));
    if (into->size() > kIdleKeep) {
      const size_t cut = into->find('\n', into->size() - kIdleKeep);
      into->erase(0, cut == std::string::npos ? into->size() : cut + 1);
    }
  }
  return false;
}

}  // namespace

PooledSandbox::PooledSandbox(std::string id, std::string plan_digest, std::string generation,
                             int64_t created_ns, bool filtered, std::unique_ptr<RunState> state,
                             RunIo io, Enforcement evidence)
    : PreparedSandbox(std::move(id), std::move(plan_digest), std::move(generation), created_ns),
      filtered_(filtered),
      state_(std::move(state)),
      io_(std::move(io)) {
  enforcement_ = std::move(evidence);
}

PooledSandbox::~PooledSandbox() {
  if (!state_) return;  // handed to a session (TakeState)
  // EOF on its channel: the launcher exits 125 without running anything; then everything goes.
  io_.go.write.Reset();
  io_.stdin_pipe.reset();
  state_->Teardown(std::chrono::milliseconds(2000));
}

bool PooledSandbox::Healthy() {
  if (!state_) return false;
  const bool log_open = DrainInto(io_.log.read, &io_.idle_log);
  const bool diag_open = DrainInto(io_.diag.read, &io_.idle_diag);
  if (!state_->runsc.reaped()) state_->runsc.TryWait().ok();
  return log_open && diag_open && !state_->runsc.reaped();
}

}  // namespace safex::drivers::gvisor
