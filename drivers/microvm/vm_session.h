// VmSession: the host's side of one boot, from QEMU's start to the guest's last frame.
//
// One poll loop over the channel socket, the console socket, QEMU's stderr and its pidfd, with a
// deadline per phase:
//   booting   until kHello             boot_timeout from the start
//   setup     until kStarted           the same boot deadline (kEvidence first, answered kGo);
//                                      a pooled VM's preparation ends at kSetUp instead, and
//                                      its hand-over starts here (SessionConfig::request_payload)
//   running   until kExit              wall_time from kStarted (the program's own wall clock);
//                                      output and heartbeats meanwhile; a guest silent for 2 s
//                                      is nudged (an empty kNudge, once per 2 s)
//   outputs   until kOutputsDone       collect_timeout from kExit
// and, in every phase, the caller's cancel token (checked at least every cancel_poll).
// The guest is trusted for nothing: every frame is checked against the phase (a state machine),
// its type's size limit and the run's caps (stdout + stderr at most the plan's output cap, output
// files through OutputReceiver). A violation ends the session at once; the caller kills the VMM.
// The session never kills QEMU itself: it returns, and the caller tears down.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "drivers/driver.h"
#include "drivers/microvm/guest_spec.h"
#include "drivers/microvm/output_receiver.h"

namespace safex::microvm {

enum class Phase { kBooting, kSetup, kRunning, kOutputs, kDone };
const char* PhaseName(Phase p);

struct SessionConfig {
  std::string spec_payload;  // kSpec; empty for a probe boot or a pooled boot (stop at kHello)
  // A pooled VM (the warm pool): its guest said this kHello in an earlier session on the same
  // channel and has waited since. The session starts in setup and sends the spec at once, or
  // the request when request_payload is set.
  std::optional<Hello> resumed_hello;
  // A pooled VM's preparation: its spec says request_later, and the session ends at the guest's
  // kSetUp (SessionResult::set_up), the VM set up and waiting for its request.
  bool stop_when_set_up = false;
  // A pooled VM set up earlier (stop_when_set_up): kRequest (GuestRequest) and stdin go first,
  // then the session goes on as a cold run's does from its spec (kEvidence, kGo, kStarted...).
  std::string request_payload;
  // Borrowed (must outlive the session): stdin can be 64 MiB, and copies of it add up.
  const std::string* stdin_data = nullptr;
  uint64_t output_cap = 0;  // stdout + stderr bytes accepted from the guest
  std::chrono::nanoseconds boot_timeout{std::chrono::seconds(30)};
  std::chrono::nanoseconds wall_timeout{std::chrono::seconds(30)};
  std::chrono::nanoseconds collect_timeout{std::chrono::seconds(30)};
  OutputReceiver* outputs = nullptr;  // null: the plan has no output mount
  // Sees stdout (0) and stderr (1) bytes as they are accepted (drivers/driver.h). Borrowed.
  const drivers::OutputObserver* on_output = nullptr;
  size_t console_tail_bytes = 8 * 1024;
  size_t stderr_keep_bytes = 4 * 1024;
  // Cancellation (RunRequest::cancel): non-zero ends the session in any phase, within
  // cancel_poll; the caller kills the VMM as on every other way out. nullptr: never cancelled.
  const std::atomic<int>* cancel = nullptr;
  std::chrono::milliseconds cancel_poll{20};
  // Called once when the guest reports kStarted (the program runs), on the session's thread.
  std::function<void()> on_started;
  // Called with the workload's sandbox report (kEvidence, before its exec; drivers/
  // sandbox_report.h): true sends kGo, false ends the session with refused_by_evidence (nothing
  // ran). Null: kGo always.
  std::function<bool(std::string_view report)> on_evidence;
};

// A kHeartbeat and when it arrived (host clock, from the start of the session).
struct HeartbeatSeen {
  Heartbeat beat;
  std::chrono::nanoseconds at{0};
};

struct SessionResult {
  Phase phase = Phase::kBooting;  // the phase the session ended in
  bool timed_out = false;         // the phase's deadline passed
  bool vmm_exited = false;        // QEMU ended on its own
  bool cancelled = false;         // ended through SessionConfig::cancel
  std::string violation;          // the guest broke the protocol (non-empty => VM to be killed)
  std::optional<Hello> hello;
  bool set_up = false;               // kSetUp arrived (SessionConfig::stop_when_set_up)
  std::string guest_setup_error;     // kSetupError: nothing ran
  bool refused_by_evidence = false;  // on_evidence said no: the program never started
  std::optional<ExitReport> exit;
  bool outputs_complete = false;  // kOutputsDone arrived
  uint64_t outputs_skipped = 0;

  // While the program ran: the first and the latest kHeartbeat, and how many came.
  std::optional<HeartbeatSeen> first_heartbeat, last_heartbeat;
  uint64_t heartbeats = 0;
  // The longest the guest went without a frame while the program ran (host clock), and how many
  // kNudges it was sent meanwhile.
  std::chrono::nanoseconds longest_silence{0};
  uint64_t nudges = 0;
  // QEMU's threads (vmm_threads.h) at the first kNudge and, if the guest was silent when the
  // session ended while the program ran, at its end: was its vCPU executing, idle or waiting.
  std::string vmm_threads_at_nudge, vmm_threads_at_end;

  std::string stdout_data, stderr_data;  // at most output_cap together
  bool output_cap_hit = false;           // the guest sent more than the cap (host-side cap)

  // Host clock, from the start of the session.
  std::chrono::nanoseconds t_hello{0}, t_started{0}, t_exit{0}, t_done{0}, t_end{0};

  std::string console_tail;  // the last bytes of the kernel console (sanitised), for diagnostics
  std::string vmm_stderr;    // the first bytes QEMU wrote to stderr (sanitised)
};

// REQUIRES: the fds are valid; ctl_fd and console_fd are stream sockets (set non-blocking here).
SessionResult RunSession(int ctl_fd, int console_fd, int stderr_fd, int vmm_pidfd,
                         const SessionConfig& config);

// A booted guest waiting for its spec (the warm pool): drains what the kernel console and QEMU's
// stderr wrote meanwhile (so neither blocks the VM), never blocking. False once QEMU exited or the
// channel has anything to say (EOF, or a frame the waiting agent never sends): the VM is no
// longer one to hand out.
bool WaitingGuestHealthy(int ctl_fd, int console_fd, int stderr_fd, int vmm_pidfd);

// Printable ASCII only (other bytes as '?'), for text from the guest or QEMU in host messages.
std::string Sanitize(std::string_view s, size_t max);

}  // namespace safex::microvm
