#include "supervisor/serve/server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "audit/json_bytes.h"
#include "audit/time_format.h"
#include "common/fs_tree.h"
#include "common/run_id.h"
#include "common/utf8.h"
#include "drivers/net/run_network.h"
#include "supervisor/backends_config.h"
#include "supervisor/network.h"
#include "supervisor/output/escape.h"
#include "supervisor/private_dir.h"
#include "supervisor/run_record.h"
#include "supervisor/runner.h"
#include "supervisor/serve/access.h"
#include "supervisor/serve/base64.h"
#include "supervisor/serve/http_parser.h"
#include "supervisor/serve/metrics.h"
#include "supervisor/serve/policy_store.h"
#include "supervisor/serve/refusal_limiter.h"
#include "supervisor/serve/submit_request.h"
#include "supervisor/serve/unix_socket.h"

namespace safex::serve {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr uint64_t kListenId = 1;
constexpr uint64_t kWakeId = 2;
constexpr uint64_t kSignalId = 3;
constexpr uint64_t kFirstConnId = 16;
constexpr size_t kMaxSideTasks = 1024;
constexpr const char* kJson = "application/json";
constexpr const char* kVersion = "0.1.0";

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Said in the answer to a refusal that was counted into a summary instead of recorded alone.
constexpr const char* kCountedNote =
    " (not recorded one by one: counted into a summary event of this caller's refusals)";

int64_t WallNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The body of every refusal: the same object `safex run --json` prints for a refusal, plus the
// HTTP-level error.
std::string RefusalBody(const supervisor::RunReport& report, int http_status) {
  json j = supervisor::ReportToJson(report);
  j["error"] = {{"status", http_status}, {"message", report.reason}};
  return Dump(j);
}

std::string RunBody(const supervisor::RunReport& report) {
  json j = supervisor::ReportToJson(report);
  // JSON carries UTF-8 only; bytes the policy let through that are not UTF-8 travel as base64 so
  // that `safex submit` prints exactly what `safex run` would.
  auto add_raw = [&j](const char* key, const std::optional<output::ValidationReport>& v) {
    if (v && !IsValidUtf8(v->delivered) && j.contains(key)) {
      j[key]["delivered_base64"] = Base64Encode(v->delivered);
    }
  };
  add_raw("stdout", report.stdout_report);
  add_raw("stderr", report.stderr_report);
  // The rendered diagnostics as `safex run` prints them (the "diagnostics" field is escaped for
  // logs); they come from the operator's policy files, not from the program.
  if (!report.diagnostics.empty()) j["diagnostics_text"] = report.diagnostics;
  return Dump(j);
}

json SummaryJson(const audit::RunSummary& r) {
  json argv = json::array();
  for (const auto& a : r.argv) argv.push_back(audit::JsonFromBytes(a));
  return json{
      {"run_id", r.run_id},
      {"state", r.state},
      {"verdict", r.verdict.empty() ? json(nullptr) : json(r.verdict)},
      {"started_at", audit::FormatIso8601(r.start_ns)},
      {"ended_at", r.end_ns ? json(audit::FormatIso8601(*r.end_ns)) : json(nullptr)},
      {"uid", r.requester.uid ? json(*r.requester.uid) : json(nullptr)},
      {"gid", r.requester.gid ? json(*r.requester.gid) : json(nullptr)},
      {"pid", r.requester.pid ? json(*r.requester.pid) : json(nullptr)},
      {"policy", audit::JsonFromBytes(r.policy_name)},
      {"plan_digest", r.plan_digest},
      {"backend", r.backend},
      {"argv", argv},
      {"exit_code", r.exit_code ? json(*r.exit_code) : json(nullptr)},
      {"signal", r.signal ? json(*r.signal) : json(nullptr)},
      {"limits_fired", r.limits_fired},
      {"wall_ns", r.wall_ns ? json(*r.wall_ns) : json(nullptr)},
      {"reason", audit::JsonFromBytes(r.reason)},
  };
}

struct Conn {
  enum class State { kReading, kWaiting, kWriting };
  uint64_t id = 0;
  UniqueFd fd;
  Caller caller;
  // Named by an allow rule (or root): such callers can only ever be refused, so they get a small
  // share of the connections and their bodies are never read (Accept, CheckHead).
  bool listed = false;
  HttpRequestParser parser;
  State state = State::kReading;
  Clock::time_point deadline;       // reading: the whole request; writing: the whole response
  Clock::time_point head_deadline;  // reading: the request head (line and headers)
  bool head_checked = false;        // CheckHead passed: the body may be read
  uint64_t reserved = 0;            // body bytes reserved against max_buffered
  bool got_bytes = false;
  bool sent_continue = false;
  bool in_epoll = true;
  std::string out;
  size_t out_off = 0;

  explicit Conn(HttpLimits limits) : parser(limits) {}
};

struct Job {
  uint64_t conn = 0;
  Caller caller;
  std::string run_id;  // given at admission (the client learns it from a 102 response)
  int64_t admitted_ns = 0;
  SubmitRequest request;
};

struct Completion {
  uint64_t conn = 0;
  std::string response;
};

}  // namespace

struct Server::Impl {
  ServeConfig cfg;
  UniqueFd instance_lock;
  std::optional<AccessControl> access;
  std::unique_ptr<drivers::Backends> backends;  // outlives runner (declared first)
  std::unique_ptr<supervisor::Runner> runner;
  std::unique_ptr<PolicyStore> policies;
  Metrics metrics;
  RecoveryReport recovery;
  std::vector<std::unique_ptr<audit::AuditLog>> worker_logs;
  std::unique_ptr<audit::AuditLog> side_log;
  std::unique_ptr<audit::AuditLog> check_log;  // the integrity checker's own connection

  // The audit log's integrity (set by the checker thread or a worker's incremental check; once
  // damaged, every run is refused until the service restarts over a log that verifies).
  std::mutex audit_mu;
  std::string audit_damage;  // guarded by audit_mu; "" while the log verifies
  std::condition_variable check_cv;
  bool stop_check = false;  // guarded by audit_mu
  std::thread check_thread;

  std::string AuditDamage() {
    std::lock_guard<std::mutex> l(audit_mu);
    return audit_damage;
  }
  void MarkDamaged(const std::string& problem) {
    {
      std::lock_guard<std::mutex> l(audit_mu);
      if (!audit_damage.empty()) return;
      audit_damage = problem;
    }
    ServeError("the audit log does not verify: " + problem +
               "; every run is refused from now on (fail closed); restart the service over a log "
               "that verifies (`safex audit verify`)");
  }
  // The full check on a timer (audit_check_interval), on its own connection.
  void CheckLoop() {
    const auto interval = std::chrono::nanoseconds(svc().audit_check_interval_ns);
    std::unique_lock<std::mutex> l(audit_mu);
    while (!check_cv.wait_for(l, interval, [this] { return stop_check; })) {
      l.unlock();
      const auto t0 = Clock::now();
      auto rep = check_log->CheckIntegrity(audit::IntegrityCheck::kFull);
      if (!rep.ok() || !rep->ok) {
        MarkDamaged(rep.ok() ? rep->problem : rep.status().message());
      } else {
        ServeLog(
            "audit log verified: " + std::to_string(rep->events) + " events in " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()) +
            " ms");
      }
      l.lock();
    }
  }
  UniqueFd listen_fd, epoll_fd, wake_fd, signal_fd;
  std::atomic<int> cancel{0};
  HttpLimits http_limits;
  RequestLimits request_limits;
  std::unique_ptr<RefusalLimiter> limiter;  // which refusals are recorded one by one
  std::atomic<int64_t> last_space_warning_ns{0};

  // Loop thread only: open connections per uid and of unlisted callers, and request body bytes
  // reserved (all connections, per uid) against max_buffered.
  std::unordered_map<uint32_t, uint32_t> conns_per_uid;
  uint32_t unlisted_conns = 0;
  uint64_t buffered = 0;
  std::unordered_map<uint32_t, uint64_t> buffered_per_uid;

  // Admitted run requests: `jobs` waiting, `pending` = waiting + running. Guarded by jobs_mu.
  std::mutex jobs_mu;
  std::condition_variable jobs_cv;
  std::deque<Job> jobs;
  size_t pending = 0;
  bool stop_workers = false;
  std::vector<std::thread> workers;

  // Side tasks (refusal records, queries). Guarded by side_mu.
  std::mutex side_mu;
  std::condition_variable side_cv;
  std::deque<std::function<void(audit::AuditLog&)>> side;
  size_t side_busy = 0;
  bool stop_side = false;
  std::thread side_thread;

  // Responses made off the loop thread. Guarded by done_mu.
  std::mutex done_mu;
  std::vector<Completion> done;

  // Loop thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  uint64_t next_id = kFirstConnId;
  bool draining = false;
  Clock::time_point drain_deadline;
  Clock::time_point next_summaries;

  const compiler::ServiceSettings& svc() const { return cfg.host.service; }

  // ---- Off-loop helpers (any thread).
  void Complete(uint64_t conn, std::string response) {
    {
      std::lock_guard<std::mutex> l(done_mu);
      done.push_back({conn, std::move(response)});
    }
    uint64_t one = 1;
    ssize_t n = write(wake_fd.get(), &one, sizeof(one));
    (void)n;
  }

  bool PostSide(std::function<void(audit::AuditLog&)> task) {
    {
      std::lock_guard<std::mutex> l(side_mu);
      if (side.size() >= kMaxSideTasks) return false;
      side.push_back(std::move(task));
    }
    side_cv.notify_one();
    return true;
  }

  void SideLoop() {
    for (;;) {
      std::function<void(audit::AuditLog&)> task;
      {
        std::unique_lock<std::mutex> l(side_mu);
        side_cv.wait(l, [this] { return stop_side || !side.empty(); });
        if (side.empty()) return;
        task = std::move(side.front());
        side.pop_front();
        ++side_busy;
      }
      task(*side_log);
      std::lock_guard<std::mutex> l(side_mu);
      --side_busy;
    }
  }

  bool SideIdle() {
    std::lock_guard<std::mutex> l(side_mu);
    return side.empty() && side_busy == 0;
  }

  // ---- Refusals and the audit log (supervisor/serve/refusal_limiter.h).

  // Whether the audit log's filesystem is below the reserve that refusals may not eat into: the
  // space left is kept for the runs of allowed callers.
  bool AuditSpaceLow() {
    const std::string& db = svc().audit_db;
    const std::string dir = db.substr(0, db.rfind('/') == 0 ? 1 : db.rfind('/'));
    struct statvfs vfs {};
    if (statvfs(dir.c_str(), &vfs) != 0) return false;  // the write itself will tell
    const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (free_bytes >= svc().audit_reserve_bytes || svc().audit_reserve_bytes == 0) return false;
    const int64_t now = WallNs();
    int64_t last = last_space_warning_ns.load();
    if (now - last > 60'000'000'000 && last_space_warning_ns.compare_exchange_strong(last, now)) {
      ServeWarn("the audit log's filesystem has " + std::to_string(free_bytes) +
                " bytes free, below audit_reserve (" + std::to_string(svc().audit_reserve_bytes) +
                "): refusals are counted into summaries, not recorded one by one");
    }
    return true;
  }

  // Whether this refusal is recorded one by one; otherwise it is counted for its caller's next
  // summary event (over the caller's refusal rate, or the log is low on space).
  bool AdmitRefusalRecord(uint32_t uid, RefusalReason why) {
    const bool admitted = !AuditSpaceLow() && limiter->Admit(uid, why, Clock::now());
    if (!admitted) {
      if (AuditSpaceLow()) limiter->Count(uid, why, Clock::now());
      metrics.refusals_summarised.fetch_add(1);
    }
    return admitted;
  }

  // Records a refusal on `log`; when the log cannot take it, says so in the service log and
  // returns the 500 response to send instead (a refusal is never answered unrecorded as if it
  // had been recorded).
  std::optional<std::string> RecordRefusal(audit::AuditLog& log, const supervisor::RunSpec& spec,
                                           supervisor::RunReport* report) {
    Status st = supervisor::Runner::RecordRefusal(log, spec, report, svc().refusal_argv_bytes);
    if (st.ok()) return std::nullopt;
    metrics.refusals_unrecorded.fetch_add(1);
    ServeError("a refusal of uid " +
               (spec.requester.uid ? std::to_string(*spec.requester.uid) : std::string("?")) +
               " could not be recorded in the audit log (answered 500): " + st.message());
    json j = {{"error",
               {{"status", 500},
                {"message", "the service could not record this refusal in its audit log"}}},
              {"run_id", report->run_id},
              {"verdict", "refused"},
              {"exit_status", supervisor::kExitRefused},
              {"reason", "service error: the refusal could not be recorded: " + st.message()}};
    return FormatResponse(500, kJson, Dump(j));
  }

  // Refuses a run request: recorded first (side thread), then answered.
  void RefuseRun(uint64_t conn, int http_status, RefusalReason why, const std::string& message,
                 const Caller& caller, const std::string& policy,
                 const std::vector<std::string>& argv, std::vector<std::string> headers = {}) {
    metrics.Refused(why);
    supervisor::RunReport report;
    report.run_id = audit::NewRunId();
    report.reason = message;
    report.policy_name = policy;
    supervisor::RunSpec spec;
    spec.argv = argv;
    spec.requester = {caller.uid, caller.gid, caller.pid};
    auto respond = [this, conn, http_status, headers](const supervisor::RunReport& r) {
      Complete(conn, FormatResponse(http_status, kJson, RefusalBody(r, http_status), headers));
    };
    if (!AdmitRefusalRecord(caller.uid, why)) {
      report.reason += kCountedNote;
      return respond(report);
    }
    bool posted = PostSide([this, report, spec, respond, conn](audit::AuditLog& log) mutable {
      if (auto failed = RecordRefusal(log, spec, &report)) return Complete(conn, *failed);
      respond(report);
    });
    if (!posted) {
      // The audit backlog is full: the refusal is accounted for in its caller's next summary.
      limiter->Count(caller.uid, why, Clock::now());
      metrics.refusals_summarised.fetch_add(1);
      report.reason += kCountedNote;
      respond(report);
    }
  }

  // Writes the summary events that are due (all pending ones when `all`: at shutdown).
  void WriteSummaries(bool all) {
    for (RefusalLimiter::Summary& sum : limiter->TakeDue(Clock::now(), all)) {
      bool posted = PostSide([this, sum](audit::AuditLog& log) {
        supervisor::RunSpec spec;
        if (sum.uid != RefusalLimiter::kOverflowUid) spec.requester.uid = sum.uid;
        supervisor::RunReport report;
        report.run_id = audit::NewRunId();
        report.reason = sum.Text();
        Status st = supervisor::Runner::RecordRefusal(log, spec, &report);
        if (st.ok()) {
          metrics.refusal_summaries.fetch_add(1);
        } else {
          metrics.refusals_unrecorded.fetch_add(sum.count);
          ServeError("a refusal summary could not be recorded in the audit log: " + st.message() +
                     " (" + sum.Text() + ")");
        }
      });
      if (!posted) ServeError("the audit backlog is full; lost: " + sum.Text());
    }
  }

  void WorkerLoop(size_t index) {
    audit::AuditLog& log = *worker_logs[index];
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> l(jobs_mu);
        jobs_cv.wait(l, [this] { return stop_workers || !jobs.empty(); });
        if (jobs.empty()) return;
        job = std::move(jobs.front());
        jobs.pop_front();
        metrics.queue_depth.fetch_sub(1);
      }
      metrics.in_flight.fetch_add(1);
      std::string response = HandleRun(job, log);
      metrics.in_flight.fetch_sub(1);
      {
        std::lock_guard<std::mutex> l(jobs_mu);
        --pending;
      }
      Complete(job.conn, std::move(response));
    }
  }

  std::string HandleRun(Job& job, audit::AuditLog& log) {
    const auto t0 = Clock::now();
    supervisor::RunSpec spec;
    spec.argv = job.request.argv;
    spec.stdin_data = std::move(job.request.stdin_data);
    spec.requester = {job.caller.uid, job.caller.gid, job.caller.pid};
    spec.run_id = job.run_id;
    spec.cancel = &cancel;
    supervisor::RunReport report;
    report.run_id = spec.run_id;
    // A damaged audit log refuses every run, unrecorded (a log that does not verify is not
    // written to). Each run first checks the events since the last check (cheap).
    std::string damage = AuditDamage();
    if (damage.empty()) {
      const auto max_age = std::max<std::chrono::seconds>(
          audit::kDefaultMaxFullCheckAge,
          std::chrono::duration_cast<std::chrono::seconds>(
              4 * std::chrono::nanoseconds(svc().audit_check_interval_ns)));
      auto rep = log.CheckIntegrity(audit::IntegrityCheck::kIncremental, max_age);
      if (!rep.ok() || !rep->ok) {
        MarkDamaged(rep.ok() ? rep->problem : rep.status().message());
        damage = AuditDamage();
      }
    }
    if (!damage.empty()) {
      report.reason =
          "the service's audit log does not verify (" + damage + "); no run starts until it does";
      return FormatResponse(503, kJson, RefusalBody(report, 503));
    }
    // A refusal decided here is recorded on this worker's connection to the log (or counted into
    // its caller's summary); a log that cannot take it makes the answer a 500.
    auto refused = [&](RefusalReason why, int http_status) -> std::string {
      if (!AdmitRefusalRecord(job.caller.uid, why)) {
        report.reason += kCountedNote;
      } else if (auto failed = RecordRefusal(log, spec, &report)) {
        return *failed;
      } else {
        // Said once per recorded refusal: the log's own rate is the refusal rate's.
        ServeLog(why == RefusalReason::kPolicy ? Severity::kError : Severity::kInfo,
                 "run " + spec.run_id + ": refused (" + RefusalReasonName(why) +
                     "): " + output::EscapeForLog(report.reason));
      }
      if (http_status != 200)
        return FormatResponse(http_status, kJson, RefusalBody(report, http_status));
      return FormatResponse(200, kJson, RunBody(report));
    };

    auto prepared = policies->Get(job.request.policy, &report);
    metrics.policy_compilations.store(policies->compilations());
    if (!prepared.ok()) {
      if (report.policy_name.empty()) report.policy_name = job.request.policy;
      if (report.reason.empty()) report.reason = prepared.status().message();
      report.verdict = supervisor::Verdict::kRefused;
      report.exit_status = supervisor::kExitRefused;
      bool unknown = prepared.status().code() == Status::Code::kNotFound;
      const RefusalReason why = unknown ? RefusalReason::kUnknownPolicy : RefusalReason::kPolicy;
      metrics.Refused(why);
      return refused(why, unknown ? 404 : 200);
    }

    // The request's files become the run's input directory (the runner snapshots it).
    std::string input_dir;
    if (!job.request.files.empty()) {
      input_dir = ServeInputsDir(svc().state_dir) + "/" + spec.run_id;
      Status st = WriteInputs(input_dir, job.request.files);
      if (!st.ok()) {
        RemoveDir(input_dir);
        report.reason = "input files: " + st.message();
        report.verdict = supervisor::Verdict::kRefused;
        report.exit_status = supervisor::kExitRefused;
        return refused(RefusalReason::kBadRequest, 200);
      }
      spec.input_dir = input_dir;
      spec.owned_dir = input_dir;
    }

    metrics.RunStarted();
    ServeLog("run " + spec.run_id + ": started (uid " + std::to_string(job.caller.uid) +
             ", policy \"" + job.request.policy + "\", plan " + (*prepared)->digest.substr(0, 12) +
             ")");
    supervisor::RunReport result = runner->Execute(**prepared, std::move(spec), log);
    if (!input_dir.empty()) RemoveDir(input_dir);
    double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    metrics.RunFinished(result.verdict, seconds);
    LogEnd(result, seconds);
    return FormatResponse(200, kJson, RunBody(result));
  }

  // One line per ended run: its verdict and status, and why when it is not a plain exit. Setup
  // errors and undeliverable outputs are errors for the operator, not for the caller.
  static void LogEnd(const supervisor::RunReport& r, double seconds) {
    const supervisor::Verdict v = r.verdict;
    const Severity severity =
        v == supervisor::Verdict::kSetupError || v == supervisor::Verdict::kDeliveryFailed
            ? Severity::kError
            : Severity::kInfo;
    std::string line = "run " + r.run_id + ": " + std::string(supervisor::VerdictName(v)) +
                       " (exit status " + std::to_string(r.exit_status) + ", " +
                       std::to_string(static_cast<int64_t>(seconds * 1000)) + " ms";
    if (!r.limits_fired.empty()) line += ", limit " + r.limits_fired.front();
    line += ")";
    if (v != supervisor::Verdict::kOk && v != supervisor::Verdict::kNonzeroExit &&
        !r.reason.empty()) {
      line += ": " + output::EscapeForLog(r.reason);
    }
    if (r.result && !r.result->teardown_error.empty()) {
      ServeError("run " + r.run_id + ": teardown left something behind: " +
                 output::EscapeForLog(r.result->teardown_error));
    }
    ServeLog(severity, line);
  }

  static Status WriteInputs(const std::string& dir, const std::vector<InputFile>& files) {
    if (mkdir(dir.c_str(), 0700) != 0) return Status::Errno("mkdir", dir, errno);
    for (const InputFile& f : files) {
      // Names were validated (no '/', no leading '.'); O_EXCL|O_NOFOLLOW anyway.
      std::string path = dir + "/" + f.name;
      UniqueFd fd(open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (!fd) return Status::Errno("open", path, errno);
      size_t off = 0;
      while (off < f.data.size()) {
        ssize_t n = write(fd.get(), f.data.data() + off, f.data.size() - off);
        if (n < 0) {
          if (errno == EINTR) continue;
          return Status::Errno("write", path, errno);
        }
        off += static_cast<size_t>(n);
      }
    }
    return Status::Ok();
  }

  static void RemoveDir(const std::string& dir) {
    if (Status st = RemoveTree(dir); !st.ok())
      ServeError("could not remove " + dir + ": " + st.message());
  }

  // ---- The event loop.
  void EpollAdd(int fd, uint64_t id, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = id;
    epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, fd, &ev);
  }
  void EpollMod(Conn& c, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = c.id;
    epoll_ctl(epoll_fd.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
  }
  void EpollDel(Conn& c) {
    if (!c.in_epoll) return;
    epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
    c.in_epoll = false;
  }

  // A reading connection must have its head by head_deadline (slowloris on the head holds a slot
  // without a body to show for it) and the whole request by its deadline.
  static Clock::time_point DeadlineOf(const Conn& c) {
    if (c.state == Conn::State::kReading && !c.head_checked) {
      return std::min(c.deadline, c.head_deadline);
    }
    return c.deadline;
  }

  void Close(uint64_t id) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    EpollDel(c);
    Release(c);
    if (auto u = conns_per_uid.find(c.caller.uid); u != conns_per_uid.end() && --u->second == 0) {
      conns_per_uid.erase(u);
    }
    if (!c.listed) --unlisted_conns;
    conns.erase(it);
    metrics.connections.store(static_cast<int64_t>(conns.size()));
  }

  // Gives a connection's reserved body bytes back (its body was consumed or it closed).
  void Release(Conn& c) {
    if (c.reserved == 0) return;
    buffered -= c.reserved;
    if (auto b = buffered_per_uid.find(c.caller.uid); b != buffered_per_uid.end()) {
      b->second -= c.reserved;
      if (b->second == 0) buffered_per_uid.erase(b);
    }
    c.reserved = 0;
    metrics.buffered_bytes.store(static_cast<int64_t>(buffered));
  }

  // The caps on connections, decided at accept from SO_PEERCRED: callers that the allow rules
  // name keep getting service while any other uid misbehaves. No uid but root holds more than
  // max_connections_per_uid; callers named by no rule share max_connections_unlisted (they can
  // only ever be refused, so a few slots let them hear why); everything else is reserved.
  const char* ConnectionRefusal(const Caller& caller, bool listed) const {
    if (conns.size() >= svc().max_connections) return "too many connections";
    if (caller.uid == 0) return nullptr;  // the operator: able to stop the service anyway
    auto u = conns_per_uid.find(caller.uid);
    if (u != conns_per_uid.end() && u->second >= svc().max_connections_per_uid) {
      return "too many connections from this uid";
    }
    if (!listed && unlisted_conns >= svc().max_connections_unlisted) {
      return "too many connections from callers that no allow rule names";
    }
    return nullptr;
  }

  void Accept() {
    for (int i = 0; i < 64; ++i) {
      UniqueFd fd(accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN, or EMFILE and friends: the backlog holds them until later
      }
      auto peer = PeerOf(fd.get());
      if (!peer.ok()) continue;
      const bool listed = peer->uid == 0 || access->Named(*peer);
      if (const char* why = ConnectionRefusal(*peer, listed)) {
        // Answered at once and closed: a connection over its caps holds nothing.
        metrics.Refused(RefusalReason::kConnections);
        std::string r =
            FormatResponse(503, kJson, Dump(json{{"error", {{"status", 503}, {"message", why}}}}),
                           {"Retry-After: 1"});
        ssize_t n = send(fd.get(), r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)n;
        continue;
      }
      auto c = std::make_unique<Conn>(http_limits);
      c->id = next_id++;
      c->fd = std::move(fd);
      c->caller = *peer;
      c->listed = listed;
      ++conns_per_uid[c->caller.uid];
      if (!listed) ++unlisted_conns;
      const auto now = Clock::now();
      c->deadline = now + std::chrono::nanoseconds(svc().request_timeout_ns);
      c->head_deadline = now + std::chrono::nanoseconds(
                                   std::min(svc().header_timeout_ns, svc().request_timeout_ns));
      EpollAdd(c->fd.get(), c->id, EPOLLIN | EPOLLRDHUP);
      conns.emplace(c->id, std::move(c));
      metrics.connections.store(static_cast<int64_t>(conns.size()));
    }
  }

  void Respond(Conn& c, std::string response) {
    c.out = std::move(response);
    c.out_off = 0;
    c.state = Conn::State::kWriting;
    c.deadline = Clock::now() + std::chrono::nanoseconds(svc().request_timeout_ns);
    if (c.in_epoll) EpollMod(c, EPOLLOUT);
    TryWrite(c);
  }

  // Writes what the socket takes now; closes the connection when done or broken.
  void TryWrite(Conn& c) {
    while (c.out_off < c.out.size()) {
      ssize_t n = send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
          if (!c.in_epoll) {
            EpollAdd(c.fd.get(), c.id, EPOLLOUT);
            c.in_epoll = true;
          }
          return;
        }
        break;  // the client is gone
      }
      c.out_off += static_cast<size_t>(n);
    }
    // Done (or failed): say we are finished, let the client read the rest, and close.
    shutdown(c.fd.get(), SHUT_WR);
    Close(c.id);
  }

  void RespondError(Conn& c, int status, const std::string& message) {
    json j = {{"error", {{"status", status}, {"message", message}}},
              {"verdict", "refused"},
              {"exit_status", supervisor::kExitRefused},
              {"reason", message}};
    Respond(c, FormatResponse(status, kJson, Dump(j)));
  }

  void OnReadable(Conn& c) {
    char buf[16384];
    for (int rounds = 0; rounds < 16 && c.state == Conn::State::kReading; ++rounds) {
      ssize_t n = recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return;
        Close(c.id);
        return;
      }
      if (n == 0) {
        if (!c.got_bytes) {
          Close(c.id);  // connected and left: nothing to answer
        } else {
          metrics.Refused(RefusalReason::kBadRequest);
          RespondError(c, 400, "the connection was closed before the request was complete");
        }
        return;
      }
      c.got_bytes = true;
      auto st = c.parser.Feed(std::string_view(buf, static_cast<size_t>(n)));
      if (st == HttpRequestParser::State::kError) {
        metrics.Refused(RefusalReason::kBadRequest);
        RespondError(c, c.parser.error_status(), c.parser.error_message());
        return;
      }
      // Once the head is in and before any body byte is kept: who may send one, and whether the
      // service has room for it (CheckHead answers and returns false otherwise).
      if (c.parser.headers_done() && !c.head_checked && !CheckHead(c)) return;
      if (st == HttpRequestParser::State::kDone) {
        Dispatch(c);
        return;
      }
      if (c.parser.headers_done() && c.parser.expects_continue() && !c.sent_continue) {
        c.sent_continue = true;
        static constexpr char k100[] = "HTTP/1.1 100 Continue\r\n\r\n";
        ssize_t w = send(c.fd.get(), k100, sizeof(k100) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w;
      }
    }
  }

  // The request head is in. A request with a body (a run) from a caller that no allow rule names
  // is refused now, unread: such a caller can never run anything (regression: sixty half-sent
  // 8 MiB bodies from such a uid took the service from 18 MB to 510 MB). Anyone else's body is
  // reserved against max_buffered, all connections together and a quarter of it per uid (at least
  // one max_request); without room the request is refused as busy. False when it answered.
  bool CheckHead(Conn& c) {
    c.head_checked = true;
    const uint64_t length = c.parser.content_length();
    if (length == 0 && c.parser.request().method != "POST") return true;
    const Caller caller = c.caller;
    if (!c.listed) {
      Wait(c);
      RefuseRun(c.id, 403, RefusalReason::kForbidden,
                "uid " + std::to_string(caller.uid) +
                    " is named by no allow rule of this service (see the service's allow "
                    "rules); the request was not read",
                caller, "", {});
      return false;
    }
    const uint64_t per_uid_cap =
        std::max<uint64_t>(svc().max_request_bytes, svc().max_buffered_bytes / 4);
    auto mine = buffered_per_uid.find(caller.uid);
    const uint64_t held = mine == buffered_per_uid.end() ? 0 : mine->second;
    if (buffered + length > svc().max_buffered_bytes || held + length > per_uid_cap) {
      Wait(c);
      RefuseRun(c.id, 503, RefusalReason::kBusy,
                "the service holds as many request bytes as it may (max_buffered); try again "
                "later",
                caller, "", {}, {"Retry-After: 1"});
      return false;
    }
    buffered_per_uid[caller.uid] = held + length;
    buffered += length;
    c.reserved = length;
    metrics.buffered_bytes.store(static_cast<int64_t>(buffered));
    return true;
  }

  // An interim response (RFC 9110, 1xx) naming the run, sent at admission to a client that asked
  // for it (`Prefer: safex-run-id`, as `safex submit` does), so that a client whose connection
  // drops before the result still knows which run to look up. Only on request: some HTTP clients
  // (Python's http.client) take any 1xx but 100 for the final response. Best effort: the final
  // response names the run too.
  void SendRunId(Conn& c, const std::string& run_id) {
    const std::string* prefer = c.parser.request().Header("prefer");
    if (prefer == nullptr || prefer->find("safex-run-id") == std::string::npos) return;
    const std::string interim = "HTTP/1.1 102 Processing\r\nSafex-Run-Id: " + run_id + "\r\n\r\n";
    ssize_t n = send(c.fd.get(), interim.data(), interim.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
  }

  void Wait(Conn& c) {
    c.state = Conn::State::kWaiting;
    // No interest while the run goes on; HUP/ERR are still reported and handled in Loop.
    if (c.in_epoll) EpollMod(c, 0);
  }

  void Dispatch(Conn& c) {
    const HttpRequest& req = c.parser.request();
    std::string_view path = req.Path();
    const std::string& method = req.method;
    auto method_not_allowed = [&](const char* allow) {
      metrics.Refused(RefusalReason::kBadRequest);
      json j = {{"error", {{"status", 405}, {"message", "method not allowed"}}}};
      Respond(c, FormatResponse(405, kJson, Dump(j), {std::string("Allow: ") + allow}));
    };
    if (path == "/v1/health") {
      if (method != "GET") return method_not_allowed("GET");
      const std::string damage = AuditDamage();
      json j = {{"status", draining          ? "draining"
                           : !damage.empty() ? "audit-log-damaged"
                                             : "ok"},
                {"audit_log", damage.empty() ? json("ok") : json(damage)},
                {"version", kVersion},
                {"in_flight", metrics.in_flight.load()},
                {"queued", metrics.queue_depth.load()},
                {"max_concurrent", svc().max_concurrent},
                {"max_queue", svc().max_queue},
                {"connections", metrics.connections.load()},
                {"recovered_runs", recovery.interrupted.size()}};
      return Respond(c, FormatResponse(200, kJson, Dump(j)));
    }
    if (path == "/metrics") {
      if (method != "GET") return method_not_allowed("GET");
      return Respond(c, FormatResponse(200, "text/plain; version=0.0.4", metrics.Render()));
    }
    if (path == "/v1/runs") {
      if (method == "POST") return SubmitRun(c);
      if (method == "GET") return ListRuns(c);
      return method_not_allowed("GET, POST");
    }
    if (path.starts_with("/v1/runs/")) {
      if (method != "GET") return method_not_allowed("GET");
      return GetRun(c, std::string(path.substr(9)));
    }
    metrics.Refused(RefusalReason::kBadRequest);
    json j = {{"error", {{"status", 404}, {"message", "no such endpoint"}}}};
    Respond(c, FormatResponse(404, kJson, Dump(j)));
  }

  void SubmitRun(Conn& c) {
    Wait(c);
    const Caller caller = c.caller;
    if (draining) {
      return RefuseRun(c.id, 503, RefusalReason::kShuttingDown, "the service is shutting down",
                       caller, "", {});
    }
    std::string run_id;
    auto parsed = ParseSubmitRequest(c.parser.request().body, request_limits);
    if (!parsed.ok()) {
      int status = parsed.status().code() == Status::Code::kResourceExhausted ? 413 : 400;
      return RefuseRun(c.id, status, RefusalReason::kBadRequest,
                       "bad request: " + parsed.status().message(), caller, "", {});
    }
    SubmitRequest& r = *parsed;
    // The body is decoded into the request: its bytes are no longer held by the connection.
    std::string().swap(c.parser.request().body);
    Release(c);
    if (!access->Allowed(caller, r.policy)) {
      return RefuseRun(c.id, 403, RefusalReason::kForbidden,
                       "uid " + std::to_string(caller.uid) + " may not use policy \"" + r.policy +
                           "\" (see the service's allow rules)",
                       caller, r.policy, r.argv);
    }
    {
      std::unique_lock<std::mutex> l(jobs_mu);
      if (pending >= static_cast<size_t>(svc().max_concurrent) + svc().max_queue) {
        l.unlock();
        return RefuseRun(c.id, 503, RefusalReason::kBusy,
                         "the service is at capacity (" + std::to_string(svc().max_concurrent) +
                             " running, " + std::to_string(svc().max_queue) +
                             " queued); try again later",
                         caller, r.policy, r.argv, {"Retry-After: 1"});
      }
      ++pending;
      metrics.queue_depth.fetch_add(1);
      run_id = audit::NewRunId();
      ServeLog("run " + run_id + ": admitted (uid " + std::to_string(caller.uid) + ", policy \"" +
               r.policy + "\", " + std::to_string(jobs.size()) + " queued before it)");
      jobs.push_back(Job{c.id, caller, run_id, WallNs(), std::move(r)});
    }
    jobs_cv.notify_one();
    SendRunId(c, run_id);
  }

  // Runs admitted and still queued (not yet handed to a worker, so not yet in the audit log), in
  // queue order: every one for root, the caller's own otherwise; only `run_id` when given.
  std::vector<json> QueuedRuns(const Caller& caller, const std::string& run_id) {
    std::vector<json> out;
    std::lock_guard<std::mutex> l(jobs_mu);
    size_t position = 0;
    for (const Job& j : jobs) {
      ++position;
      if (!run_id.empty() && j.run_id != run_id) continue;
      if (caller.uid != 0 && j.caller.uid != caller.uid) continue;
      out.push_back(json{{"run_id", j.run_id},
                         {"state", "queued"},
                         {"queue_position", position},
                         {"admitted_at", audit::FormatIso8601(j.admitted_ns)},
                         {"uid", j.caller.uid},
                         {"policy", j.request.policy},
                         {"verdict", nullptr}});
    }
    return out;
  }

  void ListRuns(Conn& c) {
    Wait(c);
    uint64_t limit = 20;
    std::string_view q = c.parser.request().Query();
    if (q.starts_with("limit=")) {
      std::string_view v = q.substr(6);
      if (v.empty() || v.size() > 4 ||
          !std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        metrics.Refused(RefusalReason::kBadRequest);
        return Complete(
            c.id, FormatResponse(400, kJson,
                                 R"({"error":{"status":400,"message":"limit must be 1-1000"}})"));
      }
      limit = std::clamp<uint64_t>(std::stoull(std::string(v)), 1, 1000);
    }
    const Caller caller = c.caller;
    const uint64_t id = c.id;
    bool posted = PostSide([this, caller, id, limit](audit::AuditLog& log) {
      audit::RunFilter f;
      f.limit = limit;
      if (caller.uid != 0) f.uid = caller.uid;  // callers see their own runs; root sees all
      auto runs = log.ListRuns(f);
      if (!runs.ok()) {
        return Complete(
            id,
            FormatResponse(
                500, kJson,
                Dump(json{{"error", {{"status", 500}, {"message", runs.status().message()}}}})));
      }
      json arr = json::array();
      for (json& q : QueuedRuns(caller, "")) arr.push_back(std::move(q));
      for (const auto& r : *runs) arr.push_back(SummaryJson(r));
      Complete(id, FormatResponse(200, kJson, Dump(json{{"runs", arr}})));
    });
    if (!posted)
      Complete(id, FormatResponse(503, kJson, R"({"error":{"status":503,"message":"busy"}})"));
  }

  void GetRun(Conn& c, const std::string& run_id) {
    Wait(c);
    const uint64_t id = c.id;
    if (!IsValidRunId(run_id)) {
      metrics.Refused(RefusalReason::kBadRequest);
      return Complete(
          id, FormatResponse(404, kJson, R"({"error":{"status":404,"message":"no such run"}})"));
    }
    const Caller caller = c.caller;
    // Admitted and still waiting for a worker: not in the audit log yet, but the caller's.
    std::vector<json> waiting = QueuedRuns(caller, run_id);
    if (!waiting.empty()) return Complete(id, FormatResponse(200, kJson, Dump(waiting.front())));
    bool posted = PostSide([this, caller, id, run_id](audit::AuditLog& log) {
      auto d = log.GetRun(run_id);
      // Another user's run is "not found" for the caller: its existence is not theirs to learn.
      // An exact id only (the log also matches prefixes, which the API does not offer).
      if (!d.ok() || d->run.run_id != run_id ||
          (caller.uid != 0 && d->run.requester.uid != caller.uid)) {
        return Complete(
            id, FormatResponse(404, kJson, R"({"error":{"status":404,"message":"no such run"}})"));
      }
      Complete(id, FormatResponse(200, kJson, Dump(SummaryJson(d->run))));
    });
    if (!posted)
      Complete(id, FormatResponse(503, kJson, R"({"error":{"status":503,"message":"busy"}})"));
  }

  void TakeCompletions() {
    uint64_t v;
    ssize_t n = read(wake_fd.get(), &v, sizeof(v));
    (void)n;
    std::vector<Completion> batch;
    {
      std::lock_guard<std::mutex> l(done_mu);
      batch.swap(done);
    }
    for (Completion& d : batch) {
      auto it = conns.find(d.conn);
      if (it == conns.end()) continue;
      Respond(*it->second, std::move(d.response));
    }
  }

  void BeginDrain(int sig) {
    draining = true;
    drain_deadline = Clock::now() + std::chrono::nanoseconds(svc().drain_timeout_ns);
    ServeLog("signal " + std::to_string(sig) + ": draining (no new connections; running runs " +
             "may finish within " + std::to_string(svc().drain_timeout_ns / 1000000) + " ms)");
    epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, listen_fd.get(), nullptr);
    listen_fd.Reset();
    unlink(svc().socket.c_str());
    // Connections still sending a request are dropped; queued requests are refused.
    std::vector<uint64_t> reading;
    for (auto& [id, c] : conns) {
      if (c->state == Conn::State::kReading) reading.push_back(id);
    }
    for (uint64_t id : reading) Close(id);
    std::deque<Job> queued;
    {
      std::lock_guard<std::mutex> l(jobs_mu);
      queued.swap(jobs);
      pending -= queued.size();
      metrics.queue_depth.fetch_sub(static_cast<int64_t>(queued.size()));
    }
    for (Job& j : queued) {
      RefuseRun(j.conn, 503, RefusalReason::kShuttingDown,
                "the service is shutting down; the request was not started", j.caller,
                j.request.policy, j.request.argv);
    }
  }

  bool Drained() {
    if (!conns.empty() || !SideIdle()) return false;
    std::lock_guard<std::mutex> l(jobs_mu);
    return pending == 0;
  }

  int Loop() {
    epoll_event events[64];
    for (;;) {
      auto now = Clock::now();
      auto wake = now + std::chrono::seconds(1);
      for (auto& [id, c] : conns) {
        if (c->state != Conn::State::kWaiting) wake = std::min(wake, DeadlineOf(*c));
      }
      if (draining && cancel.load() == 0) wake = std::min(wake, drain_deadline);
      int timeout = static_cast<int>(
          std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(wake - now).count()));
      int n = epoll_wait(epoll_fd.get(), events, 64, timeout);
      if (n < 0 && errno != EINTR) {
        ServeError(std::string("epoll_wait: ") + std::strerror(errno));
        return 1;
      }
      for (int i = 0; i < n; ++i) {
        uint64_t id = events[i].data.u64;
        uint32_t ev = events[i].events;
        if (id == kListenId) {
          if (listen_fd) Accept();
        } else if (id == kWakeId) {
          TakeCompletions();
        } else if (id == kSignalId) {
          signalfd_siginfo si{};
          if (read(signal_fd.get(), &si, sizeof(si)) != static_cast<ssize_t>(sizeof(si))) continue;
          int sig = static_cast<int>(si.ssi_signo);
          if (sig == SIGHUP) {
            ServeLog(
                "SIGHUP ignored: restart the service to load a changed host config "
                "(policies are reloaded on change by themselves)");
          } else if (!draining) {
            BeginDrain(sig);
          } else {
            ServeLog("second signal: cancelling every running run now");
            cancel.store(sig);
          }
        } else {
          auto it = conns.find(id);
          if (it == conns.end()) continue;
          Conn& c = *it->second;
          if (c.state == Conn::State::kReading) {
            OnReadable(c);
          } else if (c.state == Conn::State::kWriting) {
            if (ev & (EPOLLERR | EPOLLHUP)) {
              Close(id);
            } else {
              TryWrite(c);
            }
          } else if (ev & (EPOLLERR | EPOLLHUP)) {
            // The client went away while its run goes on: the run still finishes and is
            // audited; its response is dropped when it is ready.
            EpollDel(c);
          }
        }
      }
      // Deadlines.
      now = Clock::now();
      std::vector<uint64_t> late_readers, late_writers;
      for (auto& [id, c] : conns) {
        if (c->state == Conn::State::kWaiting || now < DeadlineOf(*c)) continue;
        (c->state == Conn::State::kReading ? late_readers : late_writers).push_back(id);
      }
      for (uint64_t id : late_writers) Close(id);
      for (uint64_t id : late_readers) {
        auto it = conns.find(id);
        if (it == conns.end()) continue;
        metrics.Refused(RefusalReason::kTimeout);
        if (!it->second->got_bytes) {
          Close(id);
        } else {
          RespondError(*it->second, 408, "the request did not arrive within the request timeout");
        }
      }
      if (now >= next_summaries) {
        WriteSummaries(false);
        next_summaries = now + std::chrono::seconds(1);
      }
      if (draining) {
        if (cancel.load() == 0 && now >= drain_deadline) {
          ServeLog("drain deadline reached: cancelling the runs still going");
          cancel.store(SIGTERM);
        }
        if (Drained()) {
          if (limiter->pending() == 0) return 0;
          WriteSummaries(true);  // every refusal is accounted for before the service stops
        }
      }
    }
  }

  void StopThreads() {
    {
      std::lock_guard<std::mutex> l(jobs_mu);
      stop_workers = true;
    }
    jobs_cv.notify_all();
    for (std::thread& t : workers) {
      if (t.joinable()) t.join();
    }
    {
      std::lock_guard<std::mutex> l(side_mu);
      stop_side = true;
    }
    side_cv.notify_all();
    if (side_thread.joinable()) side_thread.join();
    {
      std::lock_guard<std::mutex> l(audit_mu);
      stop_check = true;
    }
    check_cv.notify_all();
    if (check_thread.joinable()) check_thread.join();
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (impl_) {
    impl_->cancel.store(SIGTERM);
    impl_->StopThreads();
  }
}

const RecoveryReport& Server::recovery() const { return impl_->recovery; }

namespace {

// The steps of Server::Start, in order (server.h).
// 1. One daemon per state directory (and root only).
Status LockInstance(Server::Impl& s) {
  const compiler::ServiceSettings& svc = s.cfg.host.service;
  (void)svc;
  if (geteuid() != 0) return Status::PermissionDenied("safex serve needs root");
  if (mkdir(svc.state_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::Errno("mkdir", svc.state_dir, errno);
  }
  const std::string lock_path = svc.state_dir + "/serve.lock";
  s.instance_lock.Reset(open(lock_path.c_str(), O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!s.instance_lock) return Status::Errno("open", lock_path, errno);
  if (flock(s.instance_lock.get(), LOCK_EX | LOCK_NB) != 0) {
    return Status::FailedPrecondition("another safex serve is running with state dir " +
                                      svc.state_dir + " (" + lock_path + " is locked)");
  }
  return Status::Ok();
}

// 2. Configuration that must be right before anything else happens.
Status CheckConfiguration(Server::Impl& s, std::optional<gid_t>* socket_gid) {
  const compiler::ServiceSettings& svc = s.cfg.host.service;
  (void)svc;
  struct stat st {};
  if (stat(svc.policy_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::FailedPrecondition("policy_dir " + svc.policy_dir + " is not a directory");
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    return Status::FailedPrecondition("policy_dir " + svc.policy_dir +
                                      " is writable by everyone; refusing to serve its policies");
  }
  auto access = AccessControl::Create(svc.allow);
  if (!access.ok()) return access.status().With("service allow rules");
  s.access = std::move(access).value();
  if (!svc.socket_group.empty()) {
    auto gid = ResolveGroup(svc.socket_group);
    if (!gid.ok()) return gid.status().With("socket_group");
    *socket_gid = *gid;
  }
  s.http_limits.max_body_bytes = svc.max_request_bytes;
  s.request_limits.max_argv = svc.max_argv;
  s.request_limits.max_argv_bytes = svc.max_argv_bytes;
  s.request_limits.max_stdin_bytes = svc.max_stdin_bytes;
  s.request_limits.max_input_files = svc.max_input_files;
  s.request_limits.max_input_bytes = svc.max_input_bytes;
  RefusalLimits refusal_limits;
  refusal_limits.per_minute = svc.refusal_rate_per_minute;
  refusal_limits.burst = svc.refusal_burst;
  s.limiter = std::make_unique<RefusalLimiter>(refusal_limits);
  return Status::Ok();
}

// 3. The audit log: one connection per worker, one for the side thread, one for the integrity
// checker (fail closed: a damaged log stops the start).
Status OpenAuditLog(Server::Impl& s) {
  const compiler::ServiceSettings& svc = s.cfg.host.service;
  (void)svc;
  audit::AuditOptions ao;
  if (!s.cfg.audit_key.empty()) ao.key_path = s.cfg.audit_key;
  for (uint32_t i = 0; i <= svc.max_concurrent; ++i) {
    auto log = audit::AuditLog::Open(svc.audit_db, ao);
    if (!log.ok()) return log.status().With("audit log " + svc.audit_db);
    if (i == 0) {
      if (Status w = (*log)->CheckWritable(); !w.ok()) return w.With("audit log not writable");
      s.side_log = std::move(log).value();
    } else {
      s.worker_logs.push_back(std::move(log).value());
    }
  }
  // A damaged log is never used (fail closed): the whole file is checked now, and again on a
  // timer by a thread of its own (its own connection, so a check of a large log delays nothing);
  // each run checks the events since the last check (docs/audit.md, "Integrity checks").
  {
    auto full = s.side_log->CheckIntegrity(audit::IntegrityCheck::kFull);
    if (!full.ok() || !full->ok) {
      return Status::DataLoss(
          "the audit log " + svc.audit_db + " does not verify (" +
          (full.ok() ? full->problem : full.status().message()) +
          "); the service does not start over a damaged log: move it aside for examination "
          "(`safex audit verify`) and start with a new one");
    }
    auto checker = audit::AuditLog::Open(svc.audit_db, ao);
    if (!checker.ok()) return checker.status().With("audit log " + svc.audit_db);
    s.check_log = std::move(checker).value();
  }
  return Status::Ok();
}

// 4. The host's backends (built once: runs and recovery use the same), then crash recovery,
// before any work is accepted; then the private directories of request files.
Status StartBackendsAndRecover(Server::Impl& s) {
  const compiler::ServiceSettings& svc = s.cfg.host.service;
  (void)svc;
  const drivers::BackendsConfig backends =
      supervisor::BackendsConfigFrom(s.cfg.host, svc.state_dir);
  s.backends = drivers::Backends::Create(backends);
  SAFEX_RETURN_IF_ERROR(drivers::Backends::ApplyCgroupLimits(s.cfg.host.cgroups));
  RecoveryOptions ro;
  ro.state_dir = svc.state_dir;
  ro.backends = backends;
  ro.network = supervisor::NetworkConfigFrom(s.cfg.host.network);
  ro.records_dir = supervisor::RecordsDirFor(svc.audit_db);
  ro.audit_db = svc.audit_db;
  auto rec = Recover(ro, *s.backends, *s.side_log);
  if (!rec.ok()) return rec.status();
  s.recovery = std::move(rec).value();
  s.metrics.SetRecovered(s.recovery.interrupted.size());
  // Request files are a caller's data: below the state dir's private directory, which no other
  // host user can traverse (supervisor/private_dir.h).
  if (Status t = supervisor::CheckTrustedDir(svc.state_dir); !t.ok()) return t.With("state_dir");
  for (const std::string& d :
       {supervisor::PrivateRootFor(svc.state_dir), ServeInputsDir(svc.state_dir)}) {
    if (Status p = supervisor::EnsurePrivateDir(d); !p.ok()) return p.With("state_dir");
  }
  return Status::Ok();
}

// 5. The shared run lifecycle (the same Runner `safex run` uses) and the policy store.
Status CreateRunner(Server::Impl& s) {
  const compiler::ServiceSettings& svc = s.cfg.host.service;
  (void)svc;
  supervisor::RunnerOptions options;
  options.state_root = svc.state_dir;
  options.backends = s.backends.get();
  options.records_dir = supervisor::RecordsDirFor(svc.audit_db);
  options.audit_db = svc.audit_db;
  s.runner = std::make_unique<supervisor::Runner>(std::move(options));
  s.policies = std::make_unique<PolicyStore>(svc.policy_dir, s.cfg.host.ceilings);
  return Status::Ok();
}

// 6. Event sources, then the socket last.
Status OpenEventSources(Server::Impl& s, const std::optional<gid_t>& socket_gid) {
  const compiler::ServiceSettings& svc = s.cfg.host.service;
  (void)svc;
  s.epoll_fd.Reset(epoll_create1(EPOLL_CLOEXEC));
  if (!s.epoll_fd) return Status::Errno("epoll_create1", errno);
  s.wake_fd.Reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!s.wake_fd) return Status::Errno("eventfd", errno);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  s.signal_fd.Reset(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!s.signal_fd) return Status::Errno("signalfd", errno);
  auto listener = ListenUnix(svc.socket, svc.socket_mode, *socket_gid, 128);
  if (!listener.ok()) return listener.status();
  s.listen_fd = std::move(listener).value();
  s.EpollAdd(s.listen_fd.get(), kListenId, EPOLLIN);
  s.EpollAdd(s.wake_fd.get(), kWakeId, EPOLLIN);
  s.EpollAdd(s.signal_fd.get(), kSignalId, EPOLLIN);
  return Status::Ok();
}

// 7. The threads (workers, the side thread, the integrity checker).
Status StartThreads(Server::Impl& s) {
  const compiler::ServiceSettings& svc = s.cfg.host.service;
  (void)svc;
  try {
    s.side_thread = std::thread([&s] { s.SideLoop(); });
    s.check_thread = std::thread([&s] { s.CheckLoop(); });
    for (size_t i = 0; i < s.worker_logs.size(); ++i) {
      s.workers.emplace_back([&s, i] { s.WorkerLoop(i); });
    }
  } catch (const std::system_error& e) {
    s.StopThreads();
    unlink(svc.socket.c_str());
    return Status::Internal(std::string("starting threads: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(ServeConfig config) {
  auto impl = std::make_unique<Impl>();
  impl->cfg = std::move(config);
  Impl& s = *impl;
  std::optional<gid_t> socket_gid;
  SAFEX_RETURN_IF_ERROR(LockInstance(s));
  SAFEX_RETURN_IF_ERROR(CheckConfiguration(s, &socket_gid));
  SAFEX_RETURN_IF_ERROR(OpenAuditLog(s));
  SAFEX_RETURN_IF_ERROR(StartBackendsAndRecover(s));
  SAFEX_RETURN_IF_ERROR(CreateRunner(s));
  SAFEX_RETURN_IF_ERROR(OpenEventSources(s, socket_gid));
  SAFEX_RETURN_IF_ERROR(StartThreads(s));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::Run() {
  Impl& s = *impl_;
  ServeLog("listening on " + s.svc().socket + " (max_concurrent " +
           std::to_string(s.svc().max_concurrent) + ", max_queue " +
           std::to_string(s.svc().max_queue) + ")");
  int rc = s.Loop();
  s.StopThreads();
  if (Status st = drivers::net::WaitForBackgroundTeardowns(); !st.ok()) {
    ServeError("network teardown: " + st.message());
  }
  if (s.listen_fd) {
    s.listen_fd.Reset();
    unlink(s.svc().socket.c_str());
  }
  ServeLog(rc == 0 ? "stopped" : "stopped with an error");
  return rc;
}

}  // namespace safex::serve
