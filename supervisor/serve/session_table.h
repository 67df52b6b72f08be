// Agent sessions (docs/api.md, "Sessions"): one sandbox for one task of one caller, several
// commands in it, destroyed at its end and never handed to another session or caller.
//
// Each session has a keeper thread that makes its sandbox, or takes a ready one from the warm pool
// when its policy has one (Driver::OpenPreparedSession: the pooled sandbox's first process
// becomes the session's init instead of a program; it is the session's alone from then on, and
// the session's `opened` event names it as a run's end names the pooled sandbox it served).
// A sandbox the keeper makes itself (Driver::OpenSession: the sandbox's
// processes carry a parent-death signal bound to the thread that made them, so that thread lives
// as long as the session), records the session's `opened` event before anyone may use it, then
// waits for its end: a DELETE, its policy's idle timeout or maximum lifetime, or the service
// stopping. It then destroys the sandbox and records `closed` with the reason. Commands and file
// operations run on the service's worker threads, one at a time per session (a SessionLease);
// a second one while the first runs is refused (409), never queued behind it.
//
// Who may use a session: its opener's uid alone (others are told it does not exist). Closed
// sessions are kept for a while with the reason, so a late command learns why it is refused.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "audit/records.h"
#include "common/status.h"
#include "drivers/backends.h"
#include "drivers/driver.h"
#include "supervisor/runner.h"
#include "supervisor/serve/access.h"

namespace safex::serve {

// Commits one session event to the audit log.
using SessionRecorder = std::function<Status(const audit::SessionEvent&)>;

struct SessionLimits {
  uint32_t max_sessions = 16;         // live sessions of every caller together
  uint32_t max_sessions_per_uid = 4;  // live sessions of one uid
  uint32_t max_closed_kept = 1000;    // closed sessions remembered (their reason)
};

class Session {
 public:
  Session(std::string id, const Caller& owner, std::string policy,
          std::shared_ptr<const supervisor::PreparedPlan> prepared, int64_t created_ns);

  const std::string id;
  const Caller owner;
  const std::string policy;
  const std::shared_ptr<const supervisor::PreparedPlan> prepared;
  const int64_t created_ns;  // CLOCK_REALTIME

  // {"session_id", "policy", "plan_digest", "state", "created_at_ns", "execs", "max_execs",
  //  "idle_timeout_ms", "max_lifetime_ms", "closed_reason"?}
  nlohmann::json ToJson() const;

 private:
  friend class SessionTable;
  friend class SessionLease;
  enum class State { kOpening, kOpen, kClosing, kClosed };
  static const char* StateName(State s);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::kOpening;  // guarded by mu_
  bool busy_ = false;              // a command or a file operation holds it
  uint64_t execs_ = 0;             // commands started
  int64_t last_used_ns_ = 0;
  std::string close_reason_;  // set: its keeper ends it with this reason
  audit::Requester closed_by_;
  std::string open_error_;
  std::unique_ptr<drivers::SessionSandbox> sandbox_;  // only the keeper and a lease's holder
  std::thread keeper_;
};

// One operation on a session (a command or a file): while it lives nothing else uses the session
// and the idle clock stands still.
class SessionLease {
 public:
  SessionLease(SessionLease&& other) noexcept : s_(std::move(other.s_)) {}
  SessionLease& operator=(SessionLease&&) = delete;
  ~SessionLease();
  drivers::SessionSandbox& sandbox() const { return *s_->sandbox_; }
  Session& session() const { return *s_; }
  // The index this lease's command has (1 + the commands started before it; the audit log
  // requires exactly that), and the call that says it started (its start event committed: the
  // runner's on_started). A command refused before it started takes no index.
  uint64_t exec_index() const;
  void Started();

 private:
  friend class SessionTable;
  explicit SessionLease(std::shared_ptr<Session> s) : s_(std::move(s)) {}
  std::shared_ptr<Session> s_;
};

class SessionTable {
 public:
  // `sandboxes` (may be null): the warm pool, from which a session of a pooled policy takes a
  // ready sandbox instead of booting one.
  SessionTable(SessionLimits limits, drivers::Backends* backends, SessionRecorder record,
               supervisor::SandboxSource* sandboxes = nullptr);
  ~SessionTable();  // CloseAll("the service stopped")

  // A new session of `prepared` (a policy that allows sessions) for `caller`: its sandbox made and
  // its opening recorded before it returns. ResourceExhausted at the limits, FailedPrecondition
  // for a policy without sessions, Unavailable when the sandbox could not be made or recorded.
  Result<std::shared_ptr<Session>> Open(const Caller& caller, const std::string& policy,
                                        std::shared_ptr<const supervisor::PreparedPlan> prepared);
  // The session `id` when `uid` owns it (open or closed), else nullptr.
  std::shared_ptr<Session> Find(const std::string& id, uint32_t uid);
  // Takes an open session for one operation (`exec`: a command, counted against max_execs).
  // FailedPrecondition (with the reason) when it is closed or has run max_execs commands,
  // ResourceExhausted when another operation holds it.
  Result<SessionLease> Acquire(const std::shared_ptr<Session>& s, bool exec);
  // FailedPrecondition with the reason when `s` is closed or closing.
  Status CheckOpen(const Session& s) const;
  // Ends `s` and waits until its sandbox is gone and its end recorded. Idempotent.
  void Close(const std::shared_ptr<Session>& s, const std::string& reason,
             const audit::Requester& by);
  void CloseAll(const std::string& reason);
  uint64_t live() const;

 private:
  void Keep(std::shared_ptr<Session> s, drivers::Driver* driver);
  bool OpenSandbox(Session& s, drivers::Driver* driver);
  Result<std::unique_ptr<drivers::SessionSandbox>> MakeSandbox(const Session& s,
                                                               drivers::Driver* driver);
  void AwaitEnd(Session& s);
  void Forget();
  static Status CheckOpenLocked(const Session& s);  // REQUIRES: s.mu_ held
  // Sessions not closed, and into *of_uid how many of them `uid` opened. REQUIRES: mu_ held.
  uint64_t LiveLocked(uint32_t uid, uint64_t* of_uid) const;

  const SessionLimits limits_;
  drivers::Backends* backends_;
  SessionRecorder record_;
  supervisor::SandboxSource* sandboxes_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;  // guarded by mu_
  std::vector<std::string> closed_order_;                     // guarded by mu_
};

}  // namespace safex::serve
