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
#include <cctype>
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
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "audit/json_bytes.h"
#include "audit/time_format.h"
#include "common/fs_tree.h"
#include "common/run_id.h"
#include "common/sha256.h"
#include "common/strict_json.h"
#include "common/utf8.h"
#include "common/version.h"
#include "drivers/net/run_network.h"
#include "supervisor/backends_config.h"
#include "supervisor/network.h"
#include "supervisor/output/escape.h"
#include "supervisor/private_dir.h"
#include "supervisor/run_record.h"
#include "supervisor/runner.h"
#include "supervisor/serve/access.h"
#include "supervisor/serve/audit_shipper.h"
#include "supervisor/serve/base64.h"
#include "supervisor/serve/http_parser.h"
#include "supervisor/serve/live_events.h"
#include "supervisor/serve/metrics.h"
#include "supervisor/serve/policy_store.h"
#include "supervisor/serve/refusal_limiter.h"
#include "supervisor/serve/result_files.h"
#include "supervisor/serve/run_table.h"
#include "supervisor/serve/sandbox_pool.h"
#include "supervisor/serve/session_files.h"
#include "supervisor/serve/session_table.h"
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
json RefusalJson(const supervisor::RunReport& report, int http_status) {
  json j = supervisor::ReportToJson(report);
  j["error"] = {{"status", http_status}, {"message", report.reason}};
  return j;
}

json RunJson(const supervisor::RunReport& report) {
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
  return j;
}

json ErrorJson(int status, const std::string& message) {
  return json{{"error", {{"status", status}, {"message", message}}}};
}

// What a run's HTTP answer is once it has ended: the status and the body (the result object, or
// the refusal's). Kept with the run for waiting clients, GET and the `result` event.
struct RunAnswer {
  int status = 200;
  json body;
};

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
  // kAwaiting: answered when its run ends (POST with wait, a retried POST); kStreaming: follows
  // a run's events (chunked); both are fed by PumpRuns.
  enum class State { kReading, kWaiting, kWriting, kAwaiting, kStreaming };
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
  // kAwaiting / kStreaming: the run, the next event to send (streaming), whether the client
  // going away cancels the run (a waiting POST), and since when unsent bytes have not moved.
  std::shared_ptr<RunEntry> run;
  size_t next_event = 0;
  bool cancel_on_hangup = false;
  bool stream_ended = false;
  Clock::time_point stalled_since{};

  explicit Conn(HttpLimits limits) : parser(limits) {}
};

struct Job {
  std::shared_ptr<RunEntry> entry;  // id given at admission (a client learns it at once)
  Caller caller;
  SubmitRequest request;
  std::shared_ptr<Session> session;  // a session's command: runs in its sandbox
  // Instead of a run: a session operation (open, close, a file) answering connection task_conn.
  std::function<void(audit::AuditLog&)> task;
  uint64_t task_conn = 0;
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
  std::unique_ptr<PolicyStore> policies;
  // Uses backends, policies and pool_log; StopThreads stops it (its waiting sandboxes evicted and
  // recorded) before any of them goes.
  std::unique_ptr<SandboxPool> pool;
  std::unique_ptr<supervisor::Runner> runner;
  std::unique_ptr<RunTable> table;  // the runs API's runs (run_table.h)
  Metrics metrics;
  RecoveryReport recovery;
  std::vector<std::unique_ptr<audit::AuditLog>> worker_logs;
  std::unique_ptr<audit::AuditLog> side_log;
  std::unique_ptr<audit::AuditLog> check_log;  // the integrity checker's own connection
  std::unique_ptr<audit::AuditLog> pool_log;   // the warm pool's (its filler thread's) own
  // Agent sessions (session_table.h) and their keeper threads' audit connection (one at a time:
  // session_log_mu); a file operation records on its worker's own connection.
  std::unique_ptr<SessionTable> sessions;
  std::unique_ptr<audit::AuditLog> session_log;
  std::mutex session_log_mu;

  // The audit log's integrity (set by the checker thread or a worker's incremental check; once
  // damaged, every run is refused until the service restarts over a log that verifies).
  std::mutex audit_mu;
  std::string audit_damage;  // guarded by audit_mu; "" while the log verifies
  std::condition_variable check_cv;
  bool stop_check = false;  // guarded by audit_mu
  std::thread check_thread;
  // The fleet audit's shipper (audit_ship_to; null when not configured).
  std::unique_ptr<AuditShipper> shipper;

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
  // returns the 500 answer to send instead (a refusal is never answered unrecorded as if it had
  // been recorded).
  std::optional<RunAnswer> RecordRefusal(audit::AuditLog& log, const supervisor::RunSpec& spec,
                                         supervisor::RunReport* report) {
    Status st = supervisor::Runner::RecordRefusal(log, spec, report, svc().refusal_argv_bytes);
    if (st.ok()) return std::nullopt;
    metrics.refusals_unrecorded.fetch_add(1);
    ServeError("a refusal of uid " +
               (spec.requester.uid ? std::to_string(*spec.requester.uid) : std::string("?")) +
               " could not be recorded in the audit log (answered 500): " + st.message());
    json j = ErrorJson(500, "the service could not record this refusal in its audit log");
    j["run_id"] = report->run_id;
    j["verdict"] = "refused";
    j["exit_status"] = supervisor::kExitRefused;
    j["reason"] = "service error: the refusal could not be recorded: " + st.message();
    return RunAnswer{500, std::move(j)};
  }

  // Refuses a run request: recorded first (side thread), then answered through `deliver`.
  // `run_id`: the id an admitted run already has ("" : a new one).
  void RefuseWith(std::function<void(RunAnswer)> deliver, int http_status, RefusalReason why,
                  const std::string& message, const Caller& caller, const std::string& policy,
                  const std::vector<std::string>& argv, const std::string& run_id = "") {
    metrics.Refused(why);
    supervisor::RunReport report;
    report.run_id = run_id.empty() ? audit::NewRunId() : run_id;
    report.reason = message;
    report.policy_name = policy;
    supervisor::RunSpec spec;
    spec.argv = argv;
    spec.requester = {caller.uid, caller.gid, caller.pid};
    auto respond = [deliver, http_status](const supervisor::RunReport& r) {
      deliver(RunAnswer{http_status, RefusalJson(r, http_status)});
    };
    if (!AdmitRefusalRecord(caller.uid, why)) {
      report.reason += kCountedNote;
      return respond(report);
    }
    bool posted = PostSide([this, report, spec, respond, deliver](audit::AuditLog& log) mutable {
      if (auto failed = RecordRefusal(log, spec, &report)) return deliver(std::move(*failed));
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

  // A request refused before it was admitted: answered on its connection.
  void RefuseRun(uint64_t conn, int http_status, RefusalReason why, const std::string& message,
                 const Caller& caller, const std::string& policy,
                 const std::vector<std::string>& argv, std::vector<std::string> headers = {}) {
    RefuseWith(
        [this, conn, headers](RunAnswer a) {
          Complete(conn, FormatResponse(a.status, kJson, Dump(a.body), headers));
        },
        http_status, why, message, caller, policy, argv);
  }

  // An admitted run refused before a worker started it (shutdown, cancelled while queued): the
  // refusal is its result, for whoever waits for it or asks later.
  void RefuseAdmitted(const Job& job, int http_status, RefusalReason why,
                      const std::string& message) {
    std::shared_ptr<RunEntry> entry = job.entry;
    RefuseWith([this, entry](RunAnswer a) { FinishRun(*entry, std::move(a), "", {}); }, http_status,
               why, message, job.caller, job.request.policy, job.request.argv, entry->run_id);
  }

  // A run has ended (or was refused after admission): its answer and kept files go to the table,
  // which wakes its waiting and following clients.
  void FinishRun(RunEntry& e, RunAnswer answer, std::string files_dir, ResultFileList files) {
    table->Finish(e, answer.status, std::move(answer.body), std::move(files_dir), std::move(files),
                  WallNs());
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
      if (job.task) {
        job.task(log);
      } else {
        HandleRun(job, log);
      }
      metrics.in_flight.fetch_sub(1);
      {
        std::lock_guard<std::mutex> l(jobs_mu);
        --pending;
      }
    }
  }

  // Runs one admitted request and finishes its entry (run_table.h) with the answer: the result,
  // or the refusal decided here.
  void HandleRun(Job& job, audit::AuditLog& log) {
    const auto t0 = Clock::now();
    RunEntry& entry = *job.entry;
    supervisor::RunSpec spec = SpecOf(job);
    supervisor::RunReport report;
    report.run_id = spec.run_id;
    if (const std::string damage = CheckAuditBeforeRun(log); !damage.empty()) {
      report.reason =
          "the service's audit log does not verify (" + damage + "); no run starts until it does";
      return FinishRun(entry, RunAnswer{503, RefusalJson(report, 503)}, "", {});
    }
    // A refusal decided here is recorded on this worker's connection to the log (or counted into
    // its caller's summary); a log that cannot take it makes the answer a 500.
    auto refused = [&](RefusalReason why, int http_status) {
      if (!AdmitRefusalRecord(job.caller.uid, why)) {
        report.reason += kCountedNote;
      } else if (auto failed = RecordRefusal(log, spec, &report)) {
        return FinishRun(entry, std::move(*failed), "", {});
      } else {
        // Said once per recorded refusal: the log's own rate is the refusal rate's.
        ServeLog(why == RefusalReason::kPolicy ? Severity::kError : Severity::kInfo,
                 "run " + spec.run_id + ": refused (" + RefusalReasonName(why) +
                     "): " + output::EscapeForLog(report.reason));
      }
      FinishRun(entry,
                http_status != 200 ? RunAnswer{http_status, RefusalJson(report, http_status)}
                                   : RunAnswer{200, RunJson(report)},
                "", {});
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

    // The request's own choices (a shorter wall time, environment variables, a working
    // directory), only within what the policy lets callers choose: otherwise 400, audited.
    spec.wall_time_ns = job.request.wall_time_ms * 1000000;
    spec.env = job.request.env;
    spec.cwd = job.request.cwd;
    if (Status st = supervisor::CheckCallerChoices((*prepared)->plan, spec); !st.ok()) {
      report.policy_name = job.request.policy;
      report.reason = "bad request: " + st.message();
      report.verdict = supervisor::Verdict::kRefused;
      report.exit_status = supervisor::kExitRefused;
      metrics.Refused(RefusalReason::kBadRequest);
      return refused(RefusalReason::kBadRequest, 400);
    }

    // A session's command: the session held for it (and its plan still the policy's), no files
    // staged (they are written into the session).
    std::optional<SessionLease> lease;
    if (job.session) {
      int status = 0;
      std::optional<SessionLease> taken = TakeSession(job, **prepared, &report, &status);
      if (!taken) return refused(RefusalReason::kBadRequest, status);
      lease.emplace(std::move(*taken));
      spec.session = &lease->sandbox();
      spec.session_id = job.session->id;
      spec.session_exec = lease->exec_index();
    } else if (int status = StageRunFiles(job, (*prepared)->plan, &spec, &report); status != 0) {
      return refused(RefusalReason::kBadRequest, status);
    }
    const std::string input_dir = spec.input_dir;
    std::string files_dir = spec.output_dir;

    LiveEvents live(*table, entry, (*prepared)->plan);
    spec.on_output = [&live](int which, std::string_view bytes) { live.OnOutput(which, bytes); };
    // Running from the start event on (the runner's on_started): a cancel before it is a
    // refusal (nothing ran), after it an interruption, and the state says which applies.
    spec.on_started = [this, &entry, &live, &lease] {
      if (lease) lease->Started();
      table->SetState(entry, RunState::kRunning, WallNs());
      live.Start();
    };
    metrics.RunStarted();
    ServeLog("run " + spec.run_id + ": started (uid " + std::to_string(job.caller.uid) +
             ", policy \"" + job.request.policy + "\", plan " + (*prepared)->digest.substr(0, 12) +
             ")");
    supervisor::RunReport result = runner->Execute(**prepared, std::move(spec), log);
    // A session is free for its next command before its caller can learn this one ended.
    lease.reset();
    if (!input_dir.empty()) RemoveDir(input_dir);
    double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    metrics.RunFinished(result.verdict, seconds);
    LogEnd(result, seconds);
    live.Finish(result);
    ResultFileList kept = KeptFiles(result.run_id, &files_dir);
    FinishRun(entry, RunAnswer{200, RunJson(result)}, std::move(files_dir), std::move(kept));
  }

  // The session of a command, held for it. Its plan must still be its policy's: a changed policy
  // ends the session (never a command under the old plan). nullopt: refused, `report` and
  // `*status` say why (409: busy or changed, 410: closed or at max_execs).
  std::optional<SessionLease> TakeSession(const Job& job, const supervisor::PreparedPlan& now,
                                          supervisor::RunReport* report, int* status) {
    const std::shared_ptr<Session>& s = job.session;
    report->policy_name = s->policy;
    report->verdict = supervisor::Verdict::kRefused;
    report->exit_status = supervisor::kExitRefused;
    if (now.digest != s->prepared->digest) {
      const std::string why = "its policy changed since it opened (plan " +
                              s->prepared->digest.substr(0, 12) + " is now " +
                              now.digest.substr(0, 12) + ")";
      sessions->Close(s, why, {job.caller.uid, job.caller.gid, job.caller.pid});
      report->reason = "session " + s->id + " was ended: " + why;
      *status = 409;
      return std::nullopt;
    }
    auto lease = sessions->Acquire(s, /*exec=*/true);
    if (!lease.ok()) {
      report->reason = lease.status().message();
      *status = lease.status().code() == Status::Code::kResourceExhausted ? 409 : 410;
      return std::nullopt;
    }
    return std::move(lease).value();
  }

  // The run's spec from the request. The run stops for the service's own cancel (a second
  // signal, the drain deadline) and for its own (DELETE, a waiting client gone, rejected streamed
  // output): both go through the entry's cancel.
  static supervisor::RunSpec SpecOf(Job& job) {
    RunEntry& entry = *job.entry;
    supervisor::RunSpec spec;
    spec.argv = job.request.argv;
    spec.stdin_data = std::move(job.request.stdin_data);
    spec.requester = {job.caller.uid, job.caller.gid, job.caller.pid};
    spec.run_id = entry.run_id;
    spec.cancel = &entry.cancel;
    spec.cancel_reason = [&entry] {
      std::lock_guard<std::mutex> l(entry.mu);
      return entry.cancelled_by.empty() ? std::string() : "cancelled by " + entry.cancelled_by;
    };
    return spec;
  }

  // A damaged audit log refuses every run, unrecorded (a log that does not verify is not
  // written to). Each run first checks the events since the last check (cheap). The damage, or
  // "" when the log verifies.
  std::string CheckAuditBeforeRun(audit::AuditLog& log) {
    std::string damage = AuditDamage();
    if (!damage.empty()) return damage;
    const auto max_age = std::max<std::chrono::seconds>(
        audit::kDefaultMaxFullCheckAge,
        std::chrono::duration_cast<std::chrono::seconds>(
            4 * std::chrono::nanoseconds(svc().audit_check_interval_ns)));
    auto rep = log.CheckIntegrity(audit::IntegrityCheck::kIncremental, max_age);
    if (!rep.ok() || !rep->ok) {
      MarkDamaged(rep.ok() ? rep->problem : rep.status().message());
      return AuditDamage();
    }
    return "";
  }

  // The request's files become the run's input directory (the runner snapshots it); its output
  // files are delivered into a directory of its own that the service keeps (result_files.h).
  // Sets spec->input_dir / owned_dir / output_dir; on failure removes what it made, says why in
  // `report` and returns the HTTP status to answer (0: done).
  int StageRunFiles(const Job& job, const plan::Plan& plan, supervisor::RunSpec* spec,
                    supervisor::RunReport* report) {
    auto fail = [report](std::string why) {
      report->reason = std::move(why);
      report->verdict = supervisor::Verdict::kRefused;
      report->exit_status = supervisor::kExitRefused;
    };
    if (!job.request.files.empty()) {
      const std::string input_dir = ServeInputsDir(svc().state_dir) + "/" + spec->run_id;
      if (Status st = WriteInputs(input_dir, job.request.files); !st.ok()) {
        RemoveDir(input_dir);
        fail("input files: " + st.message());
        return 200;
      }
      spec->input_dir = input_dir;
      spec->owned_dir = input_dir;
    }
    if (HasOutputMount(plan)) {
      const std::string files_dir = ServeResultsDir(svc().state_dir) + "/" + spec->run_id;
      if (mkdir(files_dir.c_str(), 0700) != 0) {
        const int err = errno;
        if (!spec->input_dir.empty()) RemoveDir(spec->input_dir);
        fail("the service could not make the run's output directory: " +
             std::string(std::strerror(err)));
        return 500;
      }
      spec->output_dir = files_dir;
    }
    return 0;
  }

  static bool HasOutputMount(const plan::Plan& plan) {
    for (const plan::Mount& m : plan.mounts) {
      if (m.kind == plan::MountKind::kOutput) return true;
    }
    return false;
  }

  // The files a run left in its output directory, listed once; an empty or unreadable directory
  // is removed and `*dir` cleared.
  static ResultFileList KeptFiles(const std::string& run_id, std::string* dir) {
    if (dir->empty()) return {};
    auto list = ListResultFiles(*dir);
    if (!list.ok()) {
      ServeError("run " + run_id +
                 ": its output files cannot be listed: " + list.status().message());
    }
    if (!list.ok() || (list->files.empty() && list->unlisted == 0)) {
      RemoveDir(*dir);
      dir->clear();
      return {};
    }
    return std::move(list).value();
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
                {"version", kSafexVersion},
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
      metrics.sessions_live.store(static_cast<int64_t>(sessions->live()));
      return Respond(c, FormatResponse(200, "text/plain; version=0.0.4",
                                       metrics.Render() + RenderPoolMetrics(pool->stats())));
    }
    if (path == "/v1/sessions" || path.starts_with("/v1/sessions/")) {
      return SessionRoute(c, path.substr(12), method_not_allowed);
    }
    if (path == "/v1/runs") {
      if (method == "POST") return SubmitRun(c);
      if (method == "GET") return ListRuns(c);
      return method_not_allowed("GET, POST");
    }
    if (path.starts_with("/v1/runs/")) {
      // /v1/runs/ID, /v1/runs/ID/events, /v1/runs/ID/files, /v1/runs/ID/files/NAME
      const std::string_view rest = path.substr(9);
      const size_t slash = rest.find('/');
      const std::string id(rest.substr(0, slash));
      const std::string_view sub =
          slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
      if (sub.empty()) {
        if (method == "GET") return GetRun(c, id);
        if (method == "DELETE") return CancelRun(c, id);
        return method_not_allowed("GET, DELETE");
      }
      if (method != "GET") return method_not_allowed("GET");
      if (sub == "/events") return FollowRun(c, id);
      if (sub == "/files") return RunFiles(c, id, std::nullopt);
      if (sub.starts_with("/files/")) return RunFiles(c, id, sub.substr(7));
    }
    metrics.Refused(RefusalReason::kBadRequest);
    json j = {{"error", {{"status", 404}, {"message", "no such endpoint"}}}};
    Respond(c, FormatResponse(404, kJson, Dump(j)));
  }

  // ---- Sessions (session_table.h; docs/api.md "Sessions"). `rest` is the path after
  // /v1/sessions: "", "/ID", "/ID/exec", "/ID/files/PATH".
  void SessionRoute(Conn& c, std::string_view rest,
                    const std::function<void(const char*)>& method_not_allowed) {
    const std::string& method = c.parser.request().method;
    if (rest.empty()) {
      if (method != "POST") return method_not_allowed("POST");
      return OpenSession(c);
    }
    const std::string_view tail = rest.substr(1);
    const size_t slash = tail.find('/');
    const std::string id(tail.substr(0, slash));
    const std::string_view sub = slash == std::string_view::npos ? "" : tail.substr(slash);
    std::shared_ptr<Session> s = IsValidRunId(id) ? sessions->Find(id, c.caller.uid) : nullptr;
    if (s == nullptr) return RespondJson(c, 404, ErrorJson(404, "no such session"));
    if (sub.empty()) {
      if (method == "GET") return RespondJson(c, 200, s->ToJson());
      if (method == "DELETE") return DeleteSession(c, std::move(s));
      return method_not_allowed("GET, DELETE");
    }
    if (sub == "/exec" || sub.starts_with("/files/")) {
      // A closed session is answered at once, with the reason (the same check is made again
      // when the operation takes the session).
      if (Status open = sessions->CheckOpen(*s); !open.ok()) {
        return RespondJson(c, 410, ErrorJson(410, open.message()));
      }
    }
    if (sub == "/exec") {
      if (method != "POST") return method_not_allowed("POST");
      return SubmitRun(c, std::move(s));
    }
    if (sub.starts_with("/files/")) {
      if (method != "PUT" && method != "GET") return method_not_allowed("GET, PUT");
      auto path = PercentDecode(sub.substr(6));
      if (!path.ok()) return RespondJson(c, 400, ErrorJson(400, path.status().message()));
      return SessionFile(c, std::move(s), std::move(path).value());
    }
    RespondJson(c, 404, ErrorJson(404, "no such endpoint"));
  }

  // A session operation for a worker: answered on the connection when it is done (503 when the
  // service is at capacity).
  void PostTask(Conn& c, std::function<std::string(audit::AuditLog&)> task) {
    Wait(c);
    const uint64_t conn = c.id;
    {
      std::unique_lock<std::mutex> l(jobs_mu);
      if (draining || pending >= static_cast<size_t>(svc().max_concurrent) + svc().max_queue) {
        l.unlock();
        return Complete(conn, FormatResponse(503, kJson,
                                             Dump(ErrorJson(503,
                                                            "the service is at capacity "
                                                            "or shutting down; try again")),
                                             {"Retry-After: 1"}));
      }
      ++pending;
      metrics.queue_depth.fetch_add(1);
      Job job;
      job.task = [this, conn, task = std::move(task)](audit::AuditLog& log) {
        Complete(conn, task(log));
      };
      job.task_conn = conn;
      jobs.push_back(std::move(job));
    }
    jobs_cv.notify_one();
  }

  static std::string JsonResponse(int status, const json& body,
                                  std::vector<std::string> headers = {}) {
    return FormatResponse(status, kJson, Dump(body), headers);
  }

  // POST /v1/sessions {"policy": NAME}: allowed as a run of that policy would be; the session's
  // sandbox is made on a worker (its keeper thread), 201 when it is open.
  void OpenSession(Conn& c) {
    const Caller caller = c.caller;
    StrictJsonOptions shallow;
    shallow.max_depth = 2;
    auto body = ParseStrictJson(c.parser.request().body, shallow);
    std::string().swap(c.parser.request().body);
    Release(c);
    if (!body.ok() || !body->is_object() || body->size() != 1 || !body->contains("policy") ||
        !(*body)["policy"].is_string() ||
        !ValidPolicyName((*body)["policy"].get_ref<const std::string&>())) {
      return RespondJson(c, 400,
                         ErrorJson(400, "bad request: the body must be {\"policy\": NAME}"));
    }
    const std::string policy = (*body)["policy"].get<std::string>();
    if (!access->Allowed(caller, policy)) {
      Wait(c);
      return RefuseRun(c.id, 403, RefusalReason::kForbidden,
                       "uid " + std::to_string(caller.uid) + " may not use policy \"" + policy +
                           "\" (see the service's allow rules)",
                       caller, policy, {});
    }
    PostTask(c, [this, caller, policy](audit::AuditLog&) {
      supervisor::RunReport report;
      auto prepared = policies->Get(policy, &report);
      if (!prepared.ok()) {
        const bool unknown = prepared.status().code() == Status::Code::kNotFound;
        return JsonResponse(unknown ? 404 : 400,
                            ErrorJson(unknown ? 404 : 400, prepared.status().message()));
      }
      auto s = sessions->Open(caller, policy, *prepared);
      if (!s.ok()) {
        const Status::Code code = s.status().code();
        const int status = code == Status::Code::kResourceExhausted    ? 429
                           : code == Status::Code::kFailedPrecondition ? 400
                                                                       : 503;
        return JsonResponse(status, ErrorJson(status, s.status().message()));
      }
      metrics.sessions_opened.fetch_add(1);
      return JsonResponse(201, (*s)->ToJson(), {"Location: /v1/sessions/" + (*s)->id});
    });
  }

  void DeleteSession(Conn& c, std::shared_ptr<Session> s) {
    const Caller caller = c.caller;
    PostTask(c, [this, caller, s](audit::AuditLog&) {
      sessions->Close(s, "deleted by uid " + std::to_string(caller.uid),
                      {caller.uid, caller.gid, caller.pid});
      return JsonResponse(200, s->ToJson());
    });
  }

  // PUT writes the body to the file, GET answers with its bytes (session_files.h).
  void SessionFile(Conn& c, std::shared_ptr<Session> s, std::string path) {
    const Caller caller = c.caller;
    const bool put = c.parser.request().method == "PUT";
    std::string body = std::move(c.parser.request().body);
    Release(c);
    const uint64_t max =
        std::min<uint64_t>(svc().max_download_bytes, drivers::kMaxSessionPayloadBytes);
    PostTask(c, [this, caller, s, put, path, max, body = std::move(body)](audit::AuditLog& log) {
      auto lease = sessions->Acquire(s, /*exec=*/false);
      if (!lease.ok()) {
        const int status = lease.status().code() == Status::Code::kResourceExhausted ? 409 : 410;
        return JsonResponse(status, ErrorJson(status, lease.status().message()));
      }
      // Recorded on this worker's own connection to the log (the keepers share session_log).
      auto record = [&log](const audit::SessionEvent& e) { return log.RecordSession(e); };
      if (put) {
        auto done = PutSessionFile(*lease, path, body, caller, record);
        if (!done.ok()) return FileError(done.status());
        return JsonResponse(200, *done);
      }
      auto bytes = GetSessionFile(*lease, path, max, caller, record);
      if (!bytes.ok()) return FileError(bytes.status());
      return FormatResponse(200, "application/octet-stream", *bytes,
                            {"Safex-Sha256: " + Sha256Hex(*bytes)});
    });
  }

  static std::string FileError(const Status& st) {
    const int status = st.code() == Status::Code::kNotFound             ? 404
                       : st.code() == Status::Code::kPermissionDenied   ? 403
                       : st.code() == Status::Code::kResourceExhausted  ? 413
                       : st.code() == Status::Code::kFailedPrecondition ? 422
                       : st.code() == Status::Code::kUnavailable        ? 410
                       : st.code() == Status::Code::kInvalidArgument    ? 400
                                                                        : 500;
    return JsonResponse(status, ErrorJson(status, st.message()));
  }

  Status RecordSessionEvent(const audit::SessionEvent& e) {
    std::lock_guard<std::mutex> l(session_log_mu);
    return session_log->RecordSession(e);
  }

  // POST /v1/runs, and POST /v1/sessions/ID/exec (`session`: the command runs in it, under its
  // policy).
  void SubmitRun(Conn& c, std::shared_ptr<Session> session = nullptr) {
    Wait(c);
    const Caller caller = c.caller;
    if (draining) {
      return RefuseRun(c.id, 503, RefusalReason::kShuttingDown, "the service is shutting down",
                       caller, "", {});
    }
    // The idempotency key is checked before the body is decoded (a malformed key is the
    // client's error whatever the body).
    std::string key;
    if (const std::string* k = c.parser.request().Header("idempotency-key")) {
      if (!ValidIdempotencyKey(*k)) {
        return RefuseRun(c.id, 400, RefusalReason::kBadRequest,
                         "bad request: Idempotency-Key must be [A-Za-z0-9._:-]{1,128}", caller, "",
                         {});
      }
      key = *k;
    }
    auto parsed = ParseSubmitRequest(c.parser.request().body, request_limits, session != nullptr);
    if (!parsed.ok()) {
      int status = parsed.status().code() == Status::Code::kResourceExhausted ? 413 : 400;
      return RefuseRun(c.id, status, RefusalReason::kBadRequest,
                       "bad request: " + parsed.status().message(), caller, "", {});
    }
    SubmitRequest& r = *parsed;
    if (session) r.policy = session->policy;
    // What a retry must repeat: the request in its canonical form, whether it waits aside.
    std::string digest;
    if (!key.empty()) {
      const bool wait = r.wait;
      r.wait = true;
      auto canonical = EncodeSubmitRequest(r);
      r.wait = wait;
      digest = Sha256Hex(canonical.ok() ? *canonical : c.parser.request().body);
    }
    // The body is decoded into the request: its bytes are no longer held by the connection.
    std::string().swap(c.parser.request().body);
    Release(c);
    if (!access->Allowed(caller, r.policy)) {
      return RefuseRun(c.id, 403, RefusalReason::kForbidden,
                       "uid " + std::to_string(caller.uid) + " may not use policy \"" + r.policy +
                           "\" (see the service's allow rules)",
                       caller, r.policy, r.argv);
    }
    auto entry = std::make_shared<RunEntry>(audit::NewRunId(), caller, r.policy, WallNs());
    entry->idempotency_key = key;
    entry->request_digest = digest;
    bool existing = false;
    std::shared_ptr<RunEntry> run = table->Admit(entry, &existing);
    if (existing) return Retried(c, run, digest, r.wait);
    {
      std::unique_lock<std::mutex> l(jobs_mu);
      if (pending >= static_cast<size_t>(svc().max_concurrent) + svc().max_queue) {
        l.unlock();
        table->Forget(entry->run_id);
        return RefuseRun(c.id, 503, RefusalReason::kBusy,
                         "the service is at capacity (" + std::to_string(svc().max_concurrent) +
                             " running, " + std::to_string(svc().max_queue) +
                             " queued); try again later",
                         caller, r.policy, r.argv, {"Retry-After: 1"});
      }
      ++pending;
      metrics.queue_depth.fetch_add(1);
      ServeLog("run " + entry->run_id + ": admitted (uid " + std::to_string(caller.uid) +
               ", policy \"" + r.policy + "\", " + std::to_string(jobs.size()) +
               " queued before it" + (r.wait ? "" : ", not waited for") + ")");
      table->Event(*entry, {{"type", "state"}, {"state", "queued"}});
      const bool wait = r.wait;
      jobs.push_back(Job{entry, caller, std::move(r), std::move(session)});
      if (!wait) {
        l.unlock();
        jobs_cv.notify_one();
        return Respond(c, AcceptedResponse(*entry));
      }
    }
    jobs_cv.notify_one();
    SendRunId(c, entry->run_id);
    AwaitOrStream(c, entry);
  }

  // A waiting POST's answer: the result when the run ends, or, when the client accepts
  // application/x-ndjson, the run's event stream from its first event (the output as it is
  // validated, the result last). Either way the client going away cancels the run.
  void AwaitOrStream(Conn& c, std::shared_ptr<RunEntry> run) {
    const std::string* accept = c.parser.request().Header("accept");
    if (accept != nullptr && accept->find("application/x-ndjson") != std::string::npos) {
      return StreamRun(c, std::move(run), 0, /*cancel_on_hangup=*/true);
    }
    Await(c, std::move(run), /*cancel_on_hangup=*/true);
  }

  static bool ValidIdempotencyKey(const std::string& k) {
    if (k.empty() || k.size() > 128) return false;
    return std::all_of(k.begin(), k.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == ':' ||
             ch == '-';
    });
  }

  static std::string AcceptedResponse(const RunEntry& e) {
    const std::string base = "/v1/runs/" + e.run_id;
    std::string state;
    {
      std::lock_guard<std::mutex> l(e.mu);
      state = RunStateName(e.state);
    }
    json j = {
        {"run_id", e.run_id},
        {"state", state},
        {"links", {{"self", base}, {"events", base + "/events"}, {"files", base + "/files"}}}};
    return FormatResponse(202, kJson, Dump(j), {"Location: " + base});
  }

  // A POST whose Idempotency-Key names a run this caller already has: that run, never a second
  // one; the same key with another body is the client's mistake (409).
  void Retried(Conn& c, const std::shared_ptr<RunEntry>& run, const std::string& digest,
               bool wait) {
    if (run->request_digest != digest) {
      return Respond(c, FormatResponse(409, kJson,
                                       Dump(ErrorJson(409,
                                                      "this Idempotency-Key was used for a "
                                                      "different request (run " +
                                                          run->run_id + ")"))));
    }
    ServeLog("run " + run->run_id + ": retried request answered with the same run (uid " +
             std::to_string(c.caller.uid) + ")");
    if (!wait) return Respond(c, AcceptedResponse(*run));
    AwaitOrStream(c, run);
  }

  // The connection is answered when `run` ends (PumpRuns). A waiting POST's client that goes
  // away cancels its run (the Loop's hang-up handling): nobody is left to receive it.
  void Await(Conn& c, std::shared_ptr<RunEntry> run, bool cancel_on_hangup) {
    c.state = Conn::State::kAwaiting;
    c.run = std::move(run);
    c.cancel_on_hangup = cancel_on_hangup;
    if (c.in_epoll) EpollMod(c, 0);  // hang-ups are still reported
    PumpRun(c);
  }

  // Whether `caller` may see `run`: its owner, root, or an auditor of its policy (docs/api.md).
  bool MaySee(const Caller& caller, uint32_t owner_uid, const std::string& policy) const {
    return caller.uid == 0 || caller.uid == owner_uid || access->Audits(caller, policy);
  }

  // The held run `id` if the caller may see it; otherwise answers 404 (another uid's run is not
  // theirs to learn about) and returns null.
  std::shared_ptr<RunEntry> VisibleRun(Conn& c, const std::string& id) {
    std::shared_ptr<RunEntry> e = IsValidRunId(id) ? table->Find(id) : nullptr;
    if (e == nullptr || !MaySee(c.caller, e->owner.uid, e->policy)) return nullptr;
    return e;
  }

  void RespondJson(Conn& c, int status, const json& body, std::vector<std::string> headers = {}) {
    if (status >= 400) metrics.Refused(RefusalReason::kBadRequest);
    Respond(c, FormatResponse(status, kJson, Dump(body), headers));
  }
  void NoSuchRun(Conn& c) { RespondJson(c, 404, ErrorJson(404, "no such run")); }

  // The queue position (1-based) of a run still waiting for a worker.
  std::optional<size_t> QueuePosition(const std::string& run_id) {
    std::lock_guard<std::mutex> l(jobs_mu);
    size_t position = 0;
    for (const Job& j : jobs) {
      ++position;
      if (j.entry->run_id == run_id) return position;
    }
    return std::nullopt;
  }

  void ListRuns(Conn& c) {
    Wait(c);
    uint64_t limit = 20;
    std::string_view q = c.parser.request().Query();
    if (q.starts_with("limit=")) {
      std::string_view v = q.substr(6);
      if (v.empty() || v.size() > 4 ||
          !std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        return RespondJson(c, 400, ErrorJson(400, "limit must be 1-1000"));
      }
      limit = std::clamp<uint64_t>(std::stoull(std::string(v)), 1, 1000);
    }
    // The runs the service holds first (newest first), then the audit log's others.
    json held = json::array();
    std::set<std::string> seen;
    for (const auto& e : table->All()) {
      if (held.size() >= limit) break;
      if (!MaySee(c.caller, e->owner.uid, e->policy)) continue;
      json j = RunStateJson(*e, QueuePosition(e->run_id));
      j["verdict"] = j["result"].is_object() && j["result"].contains("verdict")
                         ? j["result"]["verdict"]
                         : json(nullptr);
      j.erase("result");
      seen.insert(e->run_id);
      held.push_back(std::move(j));
    }
    const Caller caller = c.caller;
    const uint64_t id = c.id;
    bool posted = PostSide([this, caller, id, limit, held, seen](audit::AuditLog& log) mutable {
      audit::RunFilter f;
      f.limit = limit;
      if (caller.uid != 0) f.uid = caller.uid;  // callers see their own runs; root sees all
      auto runs = log.ListRuns(f);
      if (!runs.ok()) {
        return Complete(id,
                        FormatResponse(500, kJson, Dump(ErrorJson(500, runs.status().message()))));
      }
      for (const auto& r : *runs) {
        if (held.size() >= limit) break;
        if (seen.count(r.run_id) > 0) continue;
        json j = SummaryJson(r);
        j["source"] = "audit";
        held.push_back(std::move(j));
      }
      Complete(id, FormatResponse(200, kJson, Dump(json{{"runs", held}})));
    });
    if (!posted) Complete(id, FormatResponse(503, kJson, Dump(ErrorJson(503, "busy"))));
  }

  void GetRun(Conn& c, const std::string& run_id) {
    Wait(c);
    if (std::shared_ptr<RunEntry> e = VisibleRun(c, run_id)) {
      return RespondJson(c, 200, RunStateJson(*e, QueuePosition(run_id)));
    }
    // Not held (ended longer than results_ttl ago, or before a restart): the audit log's summary.
    FromAudit(c, run_id, [](const audit::RunSummary& run) {
      json j = SummaryJson(run);
      j["source"] = "audit";
      return FormatResponse(200, kJson, Dump(j));
    });
  }

  // A run the service no longer holds: `status` with `message` when the audit log has it and the
  // caller may see it (it ended longer than results_ttl ago, or before a restart), else 404.
  void NotHeld(Conn& c, const std::string& run_id, int status, const std::string& message) {
    FromAudit(c, run_id, [status, message](const audit::RunSummary&) {
      return FormatResponse(status, kJson, Dump(ErrorJson(status, message)));
    });
  }

  // Looks `run_id` up in the audit log (side thread) and answers `answer(run)` when the caller
  // may see it; 404 otherwise. An exact id only (the log also matches prefixes, which the API
  // does not offer).
  void FromAudit(Conn& c, const std::string& run_id,
                 std::function<std::string(const audit::RunSummary&)> answer) {
    if (!IsValidRunId(run_id)) return NoSuchRun(c);
    const Caller caller = c.caller;
    const uint64_t id = c.id;
    bool posted = PostSide([this, caller, id, run_id, answer](audit::AuditLog& log) {
      auto d = log.GetRun(run_id);
      if (!d.ok() || d->run.run_id != run_id ||
          !MaySee(caller, d->run.requester.uid.value_or(UINT32_MAX), d->run.policy_name)) {
        return Complete(id, FormatResponse(404, kJson, Dump(ErrorJson(404, "no such run"))));
      }
      Complete(id, answer(d->run));
    });
    if (!posted) Complete(id, FormatResponse(503, kJson, Dump(ErrorJson(503, "busy"))));
  }

  // DELETE /v1/runs/ID: a queued run is taken out of the queue and refused; a running one is
  // killed (its end event names who cancelled it).
  void CancelRun(Conn& c, const std::string& run_id) {
    Wait(c);
    std::shared_ptr<RunEntry> e = VisibleRun(c, run_id);
    if (e == nullptr) return NotHeld(c, run_id, 409, "the run has already finished");
    const std::string who =
        "uid " + std::to_string(c.caller.uid) + " (pid " + std::to_string(c.caller.pid) + ")";
    {
      std::lock_guard<std::mutex> l(e->mu);
      if (e->state == RunState::kFinished) {
        return RespondJson(c, 409, ErrorJson(409, "the run has already finished"));
      }
      if (e->cancelled_by.empty()) e->cancelled_by = who;
    }
    ServeLog("run " + run_id + ": cancel requested by " + who);
    const bool was_queued = StopRun(*e, "cancelled by " + who + " before it started");
    json j = {{"run_id", run_id},
              {"state", was_queued ? "finished" : "running"},
              {"cancel_requested", true}};
    RespondJson(c, 202, j);
  }

  // Stops a run a caller cancelled: still queued, it is taken out of the queue and refused with
  // `queued_reason` (true); otherwise its sandbox is killed (the runner's kCancelRequested).
  bool StopRun(RunEntry& e, const std::string& queued_reason) {
    std::optional<Job> queued;
    {
      std::lock_guard<std::mutex> l(jobs_mu);
      auto it =
          std::find_if(jobs.begin(), jobs.end(), [&](const Job& j) { return j.entry.get() == &e; });
      if (it != jobs.end()) {
        queued = std::move(*it);
        jobs.erase(it);
        --pending;
        metrics.queue_depth.fetch_sub(1);
      }
    }
    if (queued) {
      RefuseAdmitted(*queued, 200, RefusalReason::kCancelled, queued_reason);
      return true;
    }
    int expected = 0;
    e.cancel.compare_exchange_strong(expected, supervisor::kCancelRequested);
    return false;
  }

  // GET /v1/runs/ID/events?from=N: the run's events, as they come, chunked (PumpRun).
  void FollowRun(Conn& c, const std::string& run_id) {
    Wait(c);
    std::shared_ptr<RunEntry> e = VisibleRun(c, run_id);
    if (e == nullptr) return NotHeld(c, run_id, 410, "the run's events are no longer kept");
    size_t from = 0;
    std::string_view q = c.parser.request().Query();
    if (!q.empty()) {
      std::string_view v = q.starts_with("from=") ? q.substr(5) : std::string_view();
      if (v.empty() || v.size() > 9 ||
          !std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        return RespondJson(c, 400, ErrorJson(400, "the only parameter is from=SEQ (a number)"));
      }
      from = std::stoull(std::string(v));
    }
    StreamRun(c, std::move(e), from, /*cancel_on_hangup=*/false);
  }

  // The connection follows `run`'s events from `from`, chunked (PumpRun). A follower going away
  // leaves the run alone; a streaming POST's (cancel_on_hangup) cancels it, as a waiting one's.
  void StreamRun(Conn& c, std::shared_ptr<RunEntry> run, size_t from, bool cancel_on_hangup) {
    c.state = Conn::State::kStreaming;
    c.next_event = from;
    c.cancel_on_hangup = cancel_on_hangup;
    c.out =
        "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n"
        "Safex-Run-Id: " +
        run->run_id + "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n";
    c.out_off = 0;
    c.run = std::move(run);
    if (c.in_epoll) EpollMod(c, EPOLLOUT);
    PumpRun(c);
  }

  // GET /v1/runs/ID/files and /files/NAME (result_files.h says why serving them is safe).
  void RunFiles(Conn& c, const std::string& run_id, std::optional<std::string_view> raw_name) {
    Wait(c);
    std::shared_ptr<RunEntry> e = VisibleRun(c, run_id);
    if (e == nullptr) return NotHeld(c, run_id, 410, "the run's files are no longer kept");
    std::string dir;
    ResultFileList files;
    int64_t ended = 0;
    {
      std::lock_guard<std::mutex> l(e->mu);
      if (e->state != RunState::kFinished) {
        return RespondJson(c, 409, ErrorJson(409, "the run has not finished"));
      }
      if (e->files_removed) {
        return RespondJson(c, 410, ErrorJson(410, "the run's files are no longer kept"));
      }
      dir = e->files_dir;
      files = e->files;
      ended = e->ended_ns;
    }
    if (!raw_name) {
      json list = json::array();
      for (const ResultFile& f : files.files) {
        list.push_back({{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
      }
      return RespondJson(c, 200,
                         {{"run_id", run_id},
                          {"files", list},
                          {"unlisted", files.unlisted},
                          {"expires_at", audit::FormatIso8601(
                                             ended + static_cast<int64_t>(svc().results_ttl_ns))}});
    }
    auto name = PercentDecode(*raw_name);
    if (!name.ok() || !ValidResultFileName(*name)) {
      return RespondJson(c, 400,
                         ErrorJson(400,
                                   "not a file name: relative, '/'-separated, no empty, "
                                   "'.' or '..' component, no NUL, UTF-8"));
    }
    auto f = std::find_if(files.files.begin(), files.files.end(),
                          [&](const ResultFile& x) { return x.name == *name; });
    if (f == files.files.end()) return RespondJson(c, 404, ErrorJson(404, "no such file"));
    if (f->size > svc().max_download_bytes) {
      return RespondJson(c, 413,
                         ErrorJson(413, "the file is larger than max_download (" +
                                            std::to_string(svc().max_download_bytes) + " bytes)"));
    }
    // Read off the event loop (a file can be large): on the side thread.
    const uint64_t id = c.id;
    const Caller caller = c.caller;
    const ResultFile file = *f;
    bool posted = PostSide([this, id, caller, dir, file, run_id](audit::AuditLog& log) {
      std::string data;
      Status st = ReadKeptFile(dir, file, &data);
      if (!st.ok()) {
        ServeError("run " + run_id + ": file " + output::EscapeForLog(file.name) +
                   " could not be read: " + st.message());
        return Complete(id, FormatResponse(500, kJson, Dump(ErrorJson(500, st.message()))));
      }
      // Nothing a run left reaches anyone without a record of who took it (fail closed).
      audit::Access access;
      access.run_id = run_id;
      access.requester = {caller.uid, caller.gid, caller.pid};
      access.what = "fetched file " + file.name + ": " + std::to_string(data.size()) +
                    " bytes, SHA-256 " + file.sha256;
      if (Status rec = log.RecordAccess(access); !rec.ok()) {
        ServeError("run " + run_id + ": a download could not be recorded in the audit log " +
                   "(answered 500): " + rec.message());
        return Complete(id, FormatResponse(500, kJson,
                                           Dump(ErrorJson(500,
                                                          "the service could not record this "
                                                          "download in its audit log"))));
      }
      ServeLog("run " + run_id + ": file " + output::EscapeForLog(file.name) + " (" +
               std::to_string(data.size()) + " bytes) fetched by uid " +
               std::to_string(caller.uid));
      Complete(id, FormatResponse(200, "application/octet-stream", data,
                                  {"Safex-Sha256: " + file.sha256}));
    });
    if (!posted) Complete(id, FormatResponse(503, kJson, Dump(ErrorJson(503, "busy"))));
  }

  // The file as listed: opened beneath its run's directory, the listed size and digest.
  static Status ReadKeptFile(const std::string& dir, const ResultFile& file, std::string* data) {
    SAFEX_ASSIGN_OR_RETURN(UniqueFd fd, OpenResultFile(dir, file.name));
    data->resize(file.size + 1);
    size_t off = 0;
    for (;;) {
      ssize_t n = read(fd.get(), data->data() + off, data->size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::Errno("read", file.name, errno);
      }
      if (n == 0) break;
      off += static_cast<size_t>(n);
      if (off == data->size()) break;
    }
    data->resize(off);
    if (off != file.size || Sha256Hex(*data) != file.sha256) {
      return Status::DataLoss("the kept file changed since the run ended");
    }
    return Status::Ok();
  }

  // Feeds a kAwaiting or kStreaming connection from its run: the answer once the run has ended,
  // or the events not yet sent (as chunks, while less than kStreamWindow bytes are unsent, so a
  // slow reader holds at most that much here), then the last chunk.
  void PumpRun(Conn& c) {
    static constexpr size_t kStreamWindow = 256 * 1024;
    RunEntry& e = *c.run;
    if (c.state == Conn::State::kAwaiting) {
      std::string body;
      int status = 0;
      {
        std::lock_guard<std::mutex> l(e.mu);
        if (e.state != RunState::kFinished) return;
        status = e.result_status;
        body = e.result_json;
      }
      c.run.reset();
      return Respond(c, FormatResponse(status, kJson, body));
    }
    if (c.state != Conn::State::kStreaming || c.stream_ended) return;
    {
      std::lock_guard<std::mutex> l(e.mu);
      while (c.next_event < e.events.size() && c.out.size() - c.out_off < kStreamWindow) {
        const std::string& line = e.events[c.next_event++];
        char size[24];
        std::snprintf(size, sizeof(size), "%zx\r\n", line.size());
        c.out += size;
        c.out += line;
        c.out += "\r\n";
      }
      if (e.state == RunState::kFinished && c.next_event >= e.events.size()) {
        c.out += "0\r\n\r\n";
        c.stream_ended = true;
      }
    }
    WriteStream(c);
  }

  // Writes what the socket takes of a stream; the stream's connection is closed once its last
  // chunk is out, or when unsent bytes have not moved for request_timeout (a reader that stopped
  // reading: the run goes on, its events stay for others).
  void WriteStream(Conn& c) {
    const size_t before = c.out_off;
    while (c.out_off < c.out.size()) {
      ssize_t n = send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        return HungUp(c);  // the reader is gone
      }
      c.out_off += static_cast<size_t>(n);
    }
    if (c.out_off == c.out.size()) {
      c.out.clear();
      c.out_off = 0;
      c.stalled_since = Clock::time_point{};
      if (c.stream_ended) {
        shutdown(c.fd.get(), SHUT_WR);
        return Close(c.id);
      }
      if (c.in_epoll) EpollMod(c, 0);
      return;
    }
    if (c.out_off != before || c.stalled_since == Clock::time_point{}) {
      c.stalled_since = Clock::now();
    }
    if (c.out_off > (1u << 20)) {  // keep the buffer from growing with what was sent
      c.out.erase(0, c.out_off);
      c.out_off = 0;
    }
    if (c.in_epoll) EpollMod(c, EPOLLOUT);
  }

  // Every waiting and following connection, after any change (their runs' events or ends).
  void PumpRuns() {
    std::vector<uint64_t> ids;
    for (auto& [id, c] : conns) {
      if (c->state == Conn::State::kAwaiting || c->state == Conn::State::kStreaming) {
        ids.push_back(id);
      }
    }
    for (uint64_t id : ids) {
      auto it = conns.find(id);
      if (it != conns.end()) PumpRun(*it->second);
    }
  }

  // A waiting (or streaming) POST's client hung up: nobody is left to receive its run, so the run
  // is cancelled. A follower's going away is only its connection's end.
  void HungUp(Conn& c) {
    const bool waiting =
        c.state == Conn::State::kAwaiting || c.state == Conn::State::kStreaming;
    if (waiting && c.cancel_on_hangup && c.run) {
      RunEntry& e = *c.run;
      bool cancel = false;
      {
        std::lock_guard<std::mutex> l(e.mu);
        if (e.state != RunState::kFinished && e.cancelled_by.empty()) {
          e.cancelled_by = "the service: its waiting client went away";
          cancel = true;
        }
      }
      if (cancel) {
        ServeLog("run " + e.run_id + ": its waiting client went away; cancelling it");
        StopRun(e, "cancelled before it started: its waiting client went away");
      }
    }
    Close(c.id);
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
    PumpRuns();
  }

  // The service stops: every run still going is cancelled with the signal's number (a run that
  // already has a cancel of its own keeps it).
  void CancelAll(int sig) {
    cancel.store(sig);
    if (!table) return;
    for (const auto& e : table->All()) {
      int expected = 0;
      e->cancel.compare_exchange_strong(expected, sig);
    }
  }

  // Runs held past results_ttl (or beyond the service's bounds) go, with their kept files
  // (removed on the side thread: the loop does no file system work).
  void ExpireRuns() {
    for (std::string& dir : table->Expire(WallNs())) {
      PostSide([dir](audit::AuditLog&) { RemoveDir(dir); });
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
      if (j.task) {
        Complete(
            j.task_conn,
            FormatResponse(503, kJson, Dump(ErrorJson(503, "the service is shutting down")), {}));
        continue;
      }
      RefuseAdmitted(j, 503, RefusalReason::kShuttingDown,
                     "the service is shutting down; the request was not started");
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
        if (c->state == Conn::State::kReading || c->state == Conn::State::kWriting) {
          wake = std::min(wake, DeadlineOf(*c));
        }
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
            CancelAll(sig);
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
          } else if (c.state == Conn::State::kAwaiting || c.state == Conn::State::kStreaming) {
            if (ev & (EPOLLERR | EPOLLHUP)) {
              HungUp(c);
            } else {
              WriteStream(c);
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
        if (c->state == Conn::State::kStreaming) {
          if (c->stalled_since != Clock::time_point{} &&
              now - c->stalled_since > std::chrono::nanoseconds(svc().request_timeout_ns)) {
            late_writers.push_back(id);  // a follower that stopped reading
          }
          continue;
        }
        if (c->state == Conn::State::kWaiting || c->state == Conn::State::kAwaiting ||
            now < DeadlineOf(*c)) {
          continue;
        }
        (c->state == Conn::State::kReading ? late_readers : late_writers).push_back(id);
      }
      for (uint64_t id : late_writers) {
        // A streaming POST's reader that stopped reading is gone as far as its run is concerned.
        auto it = conns.find(id);
        if (it != conns.end() && it->second->state == Conn::State::kStreaming) {
          HungUp(*it->second);
        } else {
          Close(id);
        }
      }
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
        ExpireRuns();
        next_summaries = now + std::chrono::seconds(1);
      }
      if (draining) {
        if (cancel.load() == 0 && now >= drain_deadline) {
          ServeLog("drain deadline reached: cancelling the runs still going");
          CancelAll(SIGTERM);
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
    // No command can run in a session any more: every live one is ended and recorded.
    if (sessions) sessions->CloseAll("interrupted: the service stopped");
    // No run can take a pooled sandbox any more: the waiting ones are destroyed now.
    if (pool) pool->Stop();
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
    // Last: whatever the service recorded while stopping is shipped at the next start.
    if (shipper) shipper->Stop();
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (impl_) {
    impl_->CancelAll(SIGTERM);
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
    auto pool_log = audit::AuditLog::Open(svc.audit_db, ao);
    if (!pool_log.ok()) return pool_log.status().With("audit log " + svc.audit_db);
    s.pool_log = std::move(pool_log).value();
    auto session_log = audit::AuditLog::Open(svc.audit_db, ao);
    if (!session_log.ok()) return session_log.status().With("audit log " + svc.audit_db);
    s.session_log = std::move(session_log).value();
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
  for (const std::string& d : {supervisor::PrivateRootFor(svc.state_dir),
                               ServeInputsDir(svc.state_dir), ServeResultsDir(svc.state_dir)}) {
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
  s.policies = std::make_unique<PolicyStore>(svc.policy_dir, s.cfg.host.ceilings);
  // The warm pool fills from the same store a request resolves its policy through, so a pooled
  // sandbox is made from exactly the plan a request of that policy gets now.
  s.pool = std::make_unique<SandboxPool>(
      svc.pools, svc.pool_memory_bytes, s.backends.get(),
      [&s](const std::string& name) {
        supervisor::RunReport unused;
        return s.policies->Get(name, &unused);
      },
      [&s](const audit::SandboxEvent& e) { return s.pool_log->RecordSandbox(e); });
  options.sandboxes = s.pool.get();
  SessionLimits session_limits;
  session_limits.max_sessions = svc.max_sessions;
  session_limits.max_sessions_per_uid = svc.max_sessions_per_uid;
  s.sessions = std::make_unique<SessionTable>(
      session_limits, s.backends.get(),
      [&s](const audit::SessionEvent& e) { return s.RecordSessionEvent(e); }, s.pool.get());
  s.runner = std::make_unique<supervisor::Runner>(std::move(options));
  RetentionLimits keep;
  keep.ttl_ns = static_cast<int64_t>(svc.results_ttl_ns);
  keep.max_runs = svc.max_retained_runs;
  keep.max_file_bytes = svc.results_max_bytes;
  // Every change a waiting or following client may need wakes the event loop (PumpRuns).
  s.table = std::make_unique<RunTable>(keep, [&s] {
    uint64_t one = 1;
    ssize_t n = write(s.wake_fd.get(), &one, sizeof(one));
    (void)n;
  });
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

// 7. The threads (workers, the side thread, the integrity checker, the audit shipper).
Status StartThreads(Server::Impl& s) {
  const compiler::ServiceSettings& svc = s.cfg.host.service;
  if (!svc.audit_ship_to.empty()) {
    auto shipper = AuditShipper::Start(svc.audit_ship_to, svc.audit_db, svc.audit_ship_interval_ns,
                                       &s.metrics.ship);
    if (!shipper.ok()) {
      unlink(svc.socket.c_str());
      return shipper.status();
    }
    s.shipper = std::move(shipper).value();
  }
  try {
    s.pool->Start();
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
