// A gVisor session's sandbox (drivers/driver.h, SessionSandbox): booted by
// GvisorDriver::OpenSession through a cold run's steps 1-6b with the launcher in its --session
// mode, which then stays the sandbox's init and runs each command as its child
// (launch/session.c). Each command is supervised from outside as a cold run is (session_exec.cc):
// its stdout and stderr files, runsc's log, the wall deadline, the cgroup's CPU and OOM
// counters; a limit kills the command's processes through the launcher, and the whole sandbox
// when the launcher does not answer within the kill grace.
#pragma once

#include <memory>
#include <string>

#include "drivers/driver.h"
#include "drivers/gvisor/gvisor_driver.h"
#include "drivers/gvisor/run_state.h"
#include "drivers/gvisor/run_steps.h"
#include "drivers/gvisor/session_wire.h"

namespace safex::drivers::gvisor {

// What one session holds, shared by its methods and the command supervision.
struct SessionParts {
  plan::Plan plan;
  const GvisorOptions* options = nullptr;
  std::string backend_mode;
  std::unique_ptr<RunState> state;
  RunIo io;  // report and go are the wire's now
  SessionWire wire;
  bool dead = false;  // the sandbox ended (or was stopped): no further command
};

// Runs one command (session_exec.cc). Non-ok when it could not be started.
Result<RunResult> ExecCommand(SessionParts& p, const RunRequest& request);
// Keeps runsc's log and diagnostics pipes drained between commands (a full pipe would stall
// the Sentry); false once runsc has exited.
bool DrainIdle(SessionParts& p);
// Waits for the answer of `kind` to a command other than an exec (files), within `timeout`,
// keeping runsc's pipes drained; Unavailable (and the sandbox stopped) when none comes.
Result<std::string> AwaitAnswer(SessionParts& p, char kind, std::chrono::milliseconds timeout);

class GvisorSession final : public SessionSandbox {
 public:
  GvisorSession(std::string id, std::string plan_digest, int64_t created_ns, Enforcement evidence,
                std::unique_ptr<SessionParts> parts);
  ~GvisorSession() override;

  Result<RunResult> Exec(const RunRequest& request) override;
  Status WriteFile(const std::string& path, std::string_view bytes, uint32_t mode) override;
  Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) override;
  bool Alive() override;
  std::string Errors() const override { return parts_->state->errors; }

 private:
  std::unique_ptr<SessionParts> parts_;
};

}  // namespace safex::drivers::gvisor
