#include "supervisor/serve/session_table.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "audit/audit_log.h"
#include "audit/time_format.h"
#include "compiler/values.h"
#include "supervisor/serve/service_log.h"

namespace safex::serve {
namespace {

// The keeper looks at an idle session this often (a sandbox that died is ended within it).
constexpr int64_t kKeeperTickNs = 1'000'000'000;

audit::Requester ServiceRequester() {
  return {static_cast<uint32_t>(getuid()), static_cast<uint32_t>(getgid()),
          static_cast<int32_t>(getpid())};
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

Session::Session(std::string id_in, const Caller& owner_in, std::string policy_in,
                 std::shared_ptr<const supervisor::PreparedPlan> prepared_in, int64_t created)
    : id(std::move(id_in)),
      owner(owner_in),
      policy(std::move(policy_in)),
      prepared(std::move(prepared_in)),
      created_ns(created),
      last_used_ns_(created) {}

const char* Session::StateName(State s) {
  switch (s) {
    case State::kOpening:
      return "opening";
    case State::kOpen:
      return "open";
    case State::kClosing:
      return "closing";
    case State::kClosed:
      return "closed";
  }
  return "closed";
}

nlohmann::json Session::ToJson() const {
  const plan::SessionLimits& lim = prepared->plan.session;
  std::lock_guard<std::mutex> l(mu_);
  nlohmann::json j = {{"session_id", id},
                      {"policy", policy},
                      {"plan_digest", prepared->digest},
                      {"state", StateName(state_)},
                      {"created_at_ns", created_ns},
                      {"execs", execs_},
                      {"max_execs", lim.max_execs},
                      {"idle_timeout_ms", lim.idle_timeout_ns / 1000000},
                      {"max_lifetime_ms", lim.max_lifetime_ns / 1000000}};
  if (!close_reason_.empty()) j["closed_reason"] = close_reason_;
  return j;
}

SessionLease::~SessionLease() {
  if (!s_) return;
  std::lock_guard<std::mutex> l(s_->mu_);
  s_->busy_ = false;
  s_->last_used_ns_ = audit::NowNs();  // the idle clock starts again now
  s_->cv_.notify_all();
}

uint64_t SessionLease::exec_index() const {
  std::lock_guard<std::mutex> l(s_->mu_);
  return s_->execs_ + 1;
}

void SessionLease::Started() {
  std::lock_guard<std::mutex> l(s_->mu_);
  ++s_->execs_;
}

SessionTable::SessionTable(SessionLimits limits, drivers::Backends* backends,
                           SessionRecorder record, supervisor::SandboxSource* sandboxes)
    : limits_(limits), backends_(backends), record_(std::move(record)), sandboxes_(sandboxes) {}

SessionTable::~SessionTable() { CloseAll("the service stopped"); }

Result<std::shared_ptr<Session>> SessionTable::Open(
    const Caller& caller, const std::string& policy,
    std::shared_ptr<const supervisor::PreparedPlan> prepared) {
  if (!prepared->plan.session.allowed) {
    return Status::FailedPrecondition("policy \"" + policy +
                                      "\" does not allow sessions (it has no `session` block)");
  }
  if (prepared->plan.backend != plan::Backend::kGvisor) {
    return Status::FailedPrecondition("policy \"" + policy + "\" runs on the " +
                                      plan::BackendName(prepared->plan.backend) +
                                      " backend; sessions run on gvisor only");
  }
  SAFEX_ASSIGN_OR_RETURN(drivers::Driver * driver, backends_->Get(prepared->plan.backend));
  auto s = std::make_shared<Session>(audit::NewRunId(), caller, policy, std::move(prepared),
                                     audit::NowNs());
  {
    std::lock_guard<std::mutex> l(mu_);
    uint64_t mine = 0;
    const uint64_t all = LiveLocked(caller.uid, &mine);
    if (all >= limits_.max_sessions || mine >= limits_.max_sessions_per_uid) {
      return Status::ResourceExhausted(
          mine >= limits_.max_sessions_per_uid
              ? "uid " + std::to_string(caller.uid) + " has " + std::to_string(mine) +
                    " live sessions, the most one caller may have (service max_sessions_per_uid)"
              : "the service has " + std::to_string(all) +
                    " live sessions, the most it keeps (service max_sessions)");
    }
    sessions_[s->id] = s;
  }
  s->keeper_ = std::thread([this, s, driver] { Keep(s, driver); });
  std::unique_lock<std::mutex> l(s->mu_);
  s->cv_.wait(l, [&] { return s->state_ != Session::State::kOpening; });
  if (s->state_ == Session::State::kOpen) return s;
  const std::string why = s->open_error_;
  l.unlock();
  s->keeper_.join();
  std::lock_guard<std::mutex> tl(mu_);
  sessions_.erase(s->id);
  return Status::Unavailable(why);
}

// The keeper's whole life: the sandbox made and recorded, the wait for an end, the teardown and
// its record. Nothing of the session is usable before `opened` is committed.
void SessionTable::Keep(std::shared_ptr<Session> s, drivers::Driver* driver) {
  if (!OpenSandbox(*s, driver)) {
    std::lock_guard<std::mutex> l(s->mu_);
    s->state_ = Session::State::kClosed;
    s->cv_.notify_all();
    return;
  }
  AwaitEnd(*s);
  std::unique_ptr<drivers::SessionSandbox> sandbox;
  audit::SessionEvent closed;
  {
    std::lock_guard<std::mutex> l(s->mu_);
    sandbox = std::move(s->sandbox_);
    closed.reason = s->close_reason_;
    closed.requester = s->closed_by_;
  }
  sandbox.reset();  // every process, mount, cgroup and state directory of it goes now
  closed.session_id = s->id;
  closed.what = audit::SessionEvent::What::kClosed;
  if (Status st = record_(closed); !st.ok()) {
    ServeError("session " + s->id + ": its end could not be recorded in the audit log: " +
               st.message() + " (the next start's recovery records it)");
  }
  ServeLog("session " + s->id + ": closed (" + closed.reason + ")");
  std::lock_guard<std::mutex> l(s->mu_);
  s->state_ = Session::State::kClosed;
  s->cv_.notify_all();
}

// A ready sandbox of the warm pool when the policy has one, else one made now.
Result<std::unique_ptr<drivers::SessionSandbox>> SessionTable::MakeSandbox(
    const Session& s, drivers::Driver* driver) {
  const plan::Plan& plan = s.prepared->plan;
  std::unique_ptr<drivers::PreparedSandbox> pooled;
  if (sandboxes_ != nullptr) pooled = sandboxes_->Take(s.policy, s.prepared->digest, false);
  if (!pooled) {
    drivers::PrepareRequest req;
    req.sandbox_id = s.id;
    return driver->OpenSession(plan, req);
  }
  const std::string observed =
      "pooled " + pooled->id() + " made " + std::to_string(pooled->created_ns()) + " ns idle " +
      std::to_string((audit::NowNs() - pooled->created_ns()) / 1000000) + " ms";
  SAFEX_ASSIGN_OR_RETURN(auto made, driver->OpenPreparedSession(std::move(pooled), plan));
  // Named as a pooled run names its sandbox (audit: one pooled sandbox, one run or session).
  made->MutableEnforcement().Observed(
      "sandbox", observed,
      "safex serve: warm pool (each pooled sandbox serves one run or one session)");
  return made;
}

bool SessionTable::OpenSandbox(Session& s, drivers::Driver* driver) {
  const plan::Plan& plan = s.prepared->plan;
  auto made = MakeSandbox(s, driver);
  auto fail = [&s](std::string why) {
    std::lock_guard<std::mutex> l(s.mu_);
    s.open_error_ = std::move(why);
    return false;
  };
  if (!made.ok()) {
    return fail("the session's sandbox could not be made: " + FirstLine(made.status().message()));
  }
  audit::SessionEvent opened;
  opened.session_id = s.id;
  opened.what = audit::SessionEvent::What::kOpened;
  opened.requester = {s.owner.uid, s.owner.gid, s.owner.pid};
  opened.policy_name = s.policy;
  opened.plan_digest = s.prepared->digest;
  opened.backend = plan::BackendName(plan.backend);
  opened.backend_mode = plan.backend == plan::Backend::kGvisor ? plan.gvisor.platform : "";
  opened.enforcement = supervisor::EnforcementToJson((*made)->enforcement()).dump();
  if (Status st = record_(opened); !st.ok()) {
    return fail("the session could not be recorded in the audit log: " + st.message());
  }
  ServeLog("session " + s.id + ": opened (uid " + std::to_string(s.owner.uid) + ", policy \"" +
           s.policy + "\", plan " + s.prepared->digest.substr(0, 12) + ")");
  std::lock_guard<std::mutex> l(s.mu_);
  s.sandbox_ = std::move(made).value();
  s.state_ = Session::State::kOpen;
  s.cv_.notify_all();
  return true;
}

// Until a close is asked and nothing holds the session, or, while nothing holds it, its lifetime
// or idle time runs out or its sandbox dies. An operation in progress is never cut short here:
// a command is bounded by its own wall time.
void SessionTable::AwaitEnd(Session& s) {
  const plan::SessionLimits& lim = s.prepared->plan.session;
  const auto lifetime = static_cast<int64_t>(lim.max_lifetime_ns);
  const auto idle = static_cast<int64_t>(lim.idle_timeout_ns);
  std::unique_lock<std::mutex> l(s.mu_);
  for (;;) {
    const int64_t now = audit::NowNs();
    if (s.close_reason_.empty() && !s.busy_) {
      if (now - s.created_ns >= lifetime) {
        s.close_reason_ =
            "its max_lifetime (" + compiler::FormatDuration(lim.max_lifetime_ns) + ") passed";
      } else if (now - s.last_used_ns_ >= idle) {
        s.close_reason_ = "idle longer than its idle_timeout (" +
                          compiler::FormatDuration(lim.idle_timeout_ns) + ")";
      } else if (!s.sandbox_->Alive()) {
        s.close_reason_ =
            "its sandbox ended (a command ended the session's init, or memory ran out)";
      }
      if (!s.close_reason_.empty()) s.closed_by_ = ServiceRequester();
    }
    if (!s.close_reason_.empty() && !s.busy_) break;
    const int64_t wake =
        std::min({s.created_ns + lifetime, s.last_used_ns_ + idle, now + kKeeperTickNs});
    s.cv_.wait_for(l, std::chrono::nanoseconds(std::max<int64_t>(wake - now, 1000000)));
  }
  s.state_ = Session::State::kClosing;
}

std::shared_ptr<Session> SessionTable::Find(const std::string& id, uint32_t uid) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->owner.uid != uid) return nullptr;
  return it->second;
}

Status SessionTable::CheckOpen(const Session& s) const {
  std::lock_guard<std::mutex> l(s.mu_);
  return CheckOpenLocked(s);
}

Status SessionTable::CheckOpenLocked(const Session& s) {
  if (s.state_ != Session::State::kOpen || !s.close_reason_.empty()) {
    return Status::FailedPrecondition(
        "session " + s.id + " is closed" +
        (s.close_reason_.empty() ? std::string() : ": " + s.close_reason_));
  }
  return Status::Ok();
}

Result<SessionLease> SessionTable::Acquire(const std::shared_ptr<Session>& s, bool exec) {
  std::lock_guard<std::mutex> l(s->mu_);
  SAFEX_RETURN_IF_ERROR(CheckOpenLocked(*s));
  if (s->busy_) {
    return Status::ResourceExhausted(
        "session " + s->id + " is running another command or file operation; one at a time");
  }
  const uint32_t max_execs = s->prepared->plan.session.max_execs;
  if (exec && s->execs_ >= max_execs) {
    return Status::FailedPrecondition("session " + s->id + " has run its max_execs (" +
                                      std::to_string(max_execs) + ") commands");
  }
  if (!s->sandbox_->Alive()) {
    s->close_reason_ = "its sandbox ended (a command ended the session's init, or memory ran out)";
    s->closed_by_ = ServiceRequester();
    s->cv_.notify_all();
    return Status::FailedPrecondition("session " + s->id + " is closed: " + s->close_reason_);
  }
  s->busy_ = true;
  return SessionLease(s);
}

void SessionTable::Close(const std::shared_ptr<Session>& s, const std::string& reason,
                         const audit::Requester& by) {
  std::thread keeper;
  {
    std::unique_lock<std::mutex> l(s->mu_);
    if (s->close_reason_.empty()) {
      s->close_reason_ = reason;
      s->closed_by_ = by;
    }
    s->cv_.notify_all();
    s->cv_.wait(l, [&] { return s->state_ == Session::State::kClosed; });
    keeper = std::move(s->keeper_);
  }
  if (keeper.joinable()) keeper.join();
  Forget();
}

// Joins the keepers that ended on their own and forgets the oldest closed sessions past the
// number kept.
void SessionTable::Forget() {
  std::vector<std::thread> ended;
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<int64_t, std::string>> closed;
  for (auto& [id, s] : sessions_) {
    std::lock_guard<std::mutex> sl(s->mu_);
    if (s->state_ != Session::State::kClosed) continue;
    if (s->keeper_.joinable()) ended.push_back(std::move(s->keeper_));
    closed.emplace_back(s->created_ns, id);
  }
  for (std::thread& t : ended) t.join();  // each has set kClosed: it is ending now
  std::sort(closed.begin(), closed.end());
  for (size_t i = 0; i + limits_.max_closed_kept < closed.size(); ++i) {
    sessions_.erase(closed[i].second);
  }
}

void SessionTable::CloseAll(const std::string& reason) {
  std::vector<std::shared_ptr<Session>> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [id, s] : sessions_) all.push_back(s);
  }
  for (auto& s : all) Close(s, reason, ServiceRequester());
}

uint64_t SessionTable::live() const {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t unused = 0;
  return LiveLocked(0, &unused);
}

uint64_t SessionTable::LiveLocked(uint32_t uid, uint64_t* of_uid) const {
  uint64_t n = 0;
  for (const auto& [id, s] : sessions_) {
    std::lock_guard<std::mutex> sl(s->mu_);
    if (s->state_ == Session::State::kClosed) continue;
    ++n;
    *of_uid += s->owner.uid == uid;
  }
  return n;
}

}  // namespace safex::serve
