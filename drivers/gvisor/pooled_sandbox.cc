#include "drivers/gvisor/pooled_sandbox.h"

#include <unistd.h>

#include <cerrno>

namespace safex::drivers::gvisor {
namespace {

// What idling may keep of runsc's output. Past it the oldest whole lines go: supervision only
// needs what comes after the hand-over, and a partial line would confuse the log's scanner.
constexpr size_t kIdleKeep = 256 * 1024;

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
  // Thawed (it waited frozen), then EOF on its channel: the launcher exits 125 without running
  // anything; then everything goes.
  state_->Unpark().ok();
  io_.go.write.Reset();
  io_.stdin_pipe.reset();
  state_->Teardown(std::chrono::milliseconds(2000));
}

bool PooledSandbox::Healthy() {
  if (!state_) return false;
  const bool log_open = DrainInto(io_.log.read, &io_.idle_log, kIdleKeep);
  const bool diag_open = DrainInto(io_.diag.read, &io_.idle_diag, kIdleKeep);
  if (!state_->runsc.reaped()) state_->runsc.TryWait().ok();
  return log_open && diag_open && !state_->runsc.reaped();
}

}  // namespace safex::drivers::gvisor
