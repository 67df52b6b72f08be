// A gVisor sandbox of the warm pool (drivers/driver.h, PreparedSandbox): booted by
// GvisorDriver::Prepare through the same steps as a cold run (run_steps.h 1-6b), its launcher
// checked from inside and waiting for the hand-over (run_steps.h 6c) that RunPrepared sends.
// Destroying it before then closes the launcher's channel (it exits without running anything)
// and tears everything down as a cold run's end does.
#pragma once

#include <memory>
#include <string>

#include "drivers/driver.h"
#include "drivers/gvisor/run_state.h"
#include "drivers/gvisor/run_steps.h"

namespace safex::drivers::gvisor {

class PooledSandbox final : public PreparedSandbox {
 public:
  // `state` and `io` as Prepare's steps left them; `evidence` what they read back.
  PooledSandbox(std::string id, std::string plan_digest, std::string generation,
                int64_t created_ns, bool filtered, std::unique_ptr<RunState> state, RunIo io,
                Enforcement evidence);
  ~PooledSandbox() override;

  // Drains runsc's log and diagnostics pipes (a full pipe would stall the Sentry) into
  // RunIo::idle_log / idle_diag, which supervision reads first; false once runsc has exited.
  bool Healthy() override;

  // Hands everything it holds to a session's sandbox (GvisorDriver::OpenPreparedSession): it
  // then holds nothing, and its destruction does nothing.
  std::unique_ptr<RunState> TakeState() { return std::move(state_); }
  RunIo TakeIo() { return std::move(io_); }

  bool filtered() const { return filtered_; }
  RunState& state() { return *state_; }
  RunIo& io() { return io_; }

 private:
  bool filtered_;
  // Declared first, destroyed last: the pipes (io_) close before the teardown of the state.
  std::unique_ptr<RunState> state_;
  RunIo io_;
};

}  // namespace safex::drivers::gvisor
