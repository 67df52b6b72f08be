// Runner::Execute: one run, as a short script over named steps in the order they must happen
// (runner.h lists them). Each step before the start event either passes or names why the request
// is refused; every refusal goes through one path (RunAttempt::Refused), which records it.
#include "supervisor/runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <optional>
#include <string>
#include <utility>

#include "audit/audited_run.h"
#include "audit/time_format.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
#include "common/utf8.h"
#include "plan/plan_json.h"
#include "plan/verify.h"
#include "supervisor/input_stage.h"
#include "supervisor/output/delivery.h"
#include "supervisor/output/output_files.h"
#include "supervisor/output/report_json.h"
#include "supervisor/private_dir.h"
#include "supervisor/run_record.h"

namespace safex::supervisor {
namespace {

using audit::NowNs;

const plan::Mount* FindMount(const plan::Plan& p, plan::MountKind kind) {
  for (const auto& m : p.mounts) {
    if (m.kind == kind) return &m;
  }
  return nullptr;
}

// A directory the caller names must be a real directory (not a symlink to one: we do not follow
// links on the caller's behalf into places they did not name).
Status CheckDirectory(const std::string& path, const char* what) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0)
    return Status::Errno(std::string("lstat ") + what, path, errno);
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(fmt::format("{} {} is not a directory", what, path));
  }
  return Status::Ok();
}

Result<UniqueFd> OpenOutputDir(const std::string& path) {
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Errno("mkdir", path, errno);
  }
  SAFEX_RETURN_IF_ERROR(CheckDirectory(path, "output directory"));
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::Errno("open", path, errno);
  return UniqueFd(fd);
}

audit::StreamSummary SummaryOf(const drivers::CapturedStream& s,
                               const std::optional<output::ValidationReport>& report) {
  audit::StreamSummary out;
  out.bytes = s.total_bytes;
  out.truncated = s.truncated;
  out.sha256 = report ? report->raw_sha256 : "";
  return out;
}

void AppendFindings(const output::ValidationReport& report,
                    std::vector<audit::ValidatorResult>* out) {
  for (const auto& f : report.findings) {
    if (f.outcome == output::CheckOutcome::kPass) continue;  // keep the log to what mattered
    out->push_back({f.validator.empty() ? f.subject : f.validator,
                    output::CheckOutcomeName(f.outcome), f.Summary()});
  }
}

// The state root exists, only we can change it, and its private directory is ours alone
// (supervisor/private_dir.h). Cheap: a handful of syscalls per run.
Status PrepareStateRoot(const std::string& state_root) {
  if (mkdir(state_root.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::Errno("mkdir", state_root, errno);
  }
  SAFEX_RETURN_IF_ERROR(CheckTrustedDir(state_root));
  return EnsurePrivateDir(PrivateRootFor(state_root));
}

// Drivers return Status, but a library they use may still throw (nlohmann::json, std::bad_alloc):
// nothing crosses this boundary. The driver's RAII has torn the sandbox down by the time the
// exception reaches here; the run ends as a setup error with its end event, never as an abort
// that leaves mounts, cgroups and a `running` audit row behind.
Result<drivers::RunResult> RunDriver(drivers::Driver& driver,
                                     const std::function<Result<drivers::RunResult>()>& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    return Status::Internal(fmt::format("{} driver failed: {}", driver.name(), e.what()));
  } catch (...) {
    return Status::Internal(fmt::format("{} driver failed with an unknown error", driver.name()));
  }
}

// The verdict a validator's rejection or a failed delivery gives: only a run that ended on its own
// gets it; a limit that stopped the run is the more important fact (and the reason still says
// what was rejected or not delivered).
bool OutputDecidesVerdict(Verdict v) { return v == Verdict::kOk || v == Verdict::kNonzeroExit; }

// One call of Runner::Execute.
class RunAttempt {
 public:
  RunAttempt(const RunnerOptions& options, const PreparedPlan& prepared, RunSpec spec,
             audit::AuditLog& log)
      : options_(options),
        spec_(std::move(spec)),
        plan_(Derived(prepared.plan, spec_, &derived_)),
        policy_plan_(prepared.plan),
        policy_digest_(prepared.digest),
        log_(log) {
    report_.run_id = spec_.run_id.empty() ? audit::NewRunId() : spec_.run_id;
    report_.policy_name = plan_.policy_name;
    report_.policy_source_digest = plan_.source_digest;
    // A derived plan is a different plan: its own digest is what the records carry.
    report_.plan_digest = derived_ ? plan::PlanDigest(*derived_) : prepared.digest;
    report_.backend = plan::BackendName(plan_.backend);
  }

  // The plan with the request's choices (a shorter wall time, environment variables, a working
  // directory), kept in `*derived`; the plan itself when the request makes none. Choices the
  // plan does not allow are applied here too and refused by CheckRequest before anything runs.
  static const plan::Plan& Derived(const plan::Plan& plan, const RunSpec& spec,
                                   std::optional<plan::Plan>* derived) {
    if (spec.wall_time_ns == 0 && spec.env.empty() && spec.cwd.empty()) return plan;
    *derived = plan;
    plan::Plan& d = **derived;
    if (spec.wall_time_ns != 0)
      d.limits.wall_time_ns = std::min(spec.wall_time_ns, plan.limits.wall_time_ns);
    for (const auto& [k, v] : spec.env) d.env[k] = v;
    if (!spec.cwd.empty()) d.process.cwd = spec.cwd;
    return d;
  }

  // 1. The request against the plan: argv, the directories it names, the plan's validators.
  Status CheckRequest() {
    if (spec_.argv.empty()) return Status::InvalidArgument("empty argv: nothing to run");
    SAFEX_RETURN_IF_ERROR(CheckCallerChoices(policy_plan_, spec_));
    SAFEX_RETURN_IF_ERROR(CheckSessionRun());
    if (!spec_.input_dir.empty()) {
      if (FindMount(plan_, plan::MountKind::kInput) == nullptr) {
        return Status::InvalidArgument(fmt::format(
            "an input directory was given but policy {} has no input mount", plan_.policy_name));
      }
      SAFEX_RETURN_IF_ERROR(CheckDirectory(spec_.input_dir, "input directory"));
    }
    if (!spec_.output_dir.empty()) {
      if (FindMount(plan_, plan::MountKind::kOutput) == nullptr) {
        return Status::InvalidArgument(fmt::format(
            "an output directory was given but policy {} has no output mount", plan_.policy_name));
      }
      SAFEX_ASSIGN_OR_RETURN(output_dir_, OpenOutputDir(spec_.output_dir));
    }
    auto validators = output::ValidatorSet::Compile(plan_.validators);
    if (!validators.ok()) return validators.status().With("validators");
    validators_ = std::move(validators).value();
    return Status::Ok();
  }

  // A session's command runs in the sandbox made from its policy's plan; the caller's choices
  // (checked above against that plan) go with the command (RunRequest::choices), not into the
  // sandbox. No input or output directory: files are written into the session.
  Status CheckSessionRun() const {
    if (spec_.session == nullptr) return Status::Ok();
    if (!spec_.input_dir.empty() || !spec_.output_dir.empty()) {
      return Status::InvalidArgument(
          "a session's command takes no files: write them into the session instead");
    }
    if (spec_.session->plan_digest() != policy_digest_) {
      return Status::FailedPrecondition("the session's sandbox was made from another plan");
    }
    return Status::Ok();
  }

  // 2. The backend the plan names and nothing else (drivers/backends.h), probed now; then its own
  //    check of the request (bytes its runtime cannot carry), before anything exists.
  Status ChooseBackend() {
    SAFEX_ASSIGN_OR_RETURN(driver_, options_.backends->Get(plan_.backend));
    SAFEX_RETURN_IF_ERROR(ProbeBackend().With("backend unavailable"));
    request_.run_id = report_.run_id;
    request_.plan_digest = report_.plan_digest;  // of plan_, the plan the driver gets
    request_.argv = spec_.argv;
    request_.stdin_data = std::move(spec_.stdin_data);  // moved, not copied: up to 64 MiB
    request_.cancel = spec_.cancel;
    request_.on_output = spec_.on_output;
    if (spec_.session != nullptr) {
      if (!spec_.env.empty()) request_.choices.env = spec_.env;
      request_.choices.cwd = spec_.cwd;
      request_.choices.wall_time_ns = spec_.wall_time_ns;
    }
    return driver_->CheckRequest(plan_, request_);
  }

  // A session's command, or a run a pooled sandbox is ready for, runs in a sandbox the backend
  // made and checked already: only what that still depends on is probed (RunInSandbox probes
  // fully if the pooled one is gone by then).
  Status ProbeBackend() {
    probed_for_made_ = spec_.session != nullptr || PooledSandboxReady();
    return probed_for_made_ ? driver_->ProbeForMadeSandbox() : driver_->Probe();
  }
  bool PooledSandboxReady() const {
    return options_.sandboxes != nullptr && !derived_ &&
           options_.sandboxes->HasReady(plan_.policy_name, report_.plan_digest,
                                        !spec_.input_dir.empty());
  }

  // 3. Not cancelled; the state root ours alone; the owner record, before anything a crash could
  //    leave (a crash from here on is swept by run id); then the input snapshot below the state
  //    root's private directory, which no other host user can traverse.
  Status Prepare() {
    if (int sig = Cancelled(); sig != 0) {
      if (sig == kCancelRequested)
        return Status::FailedPrecondition(CancelReason() + " before it started");
      return Status::FailedPrecondition(
          fmt::format("interrupted before the run started (signal {})", sig));
    }
    SAFEX_RETURN_IF_ERROR(PrepareStateRoot(options_.state_root).With("state root"));
    if (!options_.records_dir.empty()) {
      RunRecordInfo info;
      info.run_id = report_.run_id;
      info.pid = getpid();
      info.audit_db = options_.audit_db;
      info.state_root = options_.state_root;
      info.input_dir = spec_.owned_dir;
      info.start_ns = NowNs();
      auto created = RunRecord::Create(options_.records_dir, info);
      if (!created.ok()) return created.status().With("run record");
      record_ = std::move(created).value();
    }
    if (!spec_.input_dir.empty()) {
      InputLimits limits;
      limits.max_bytes = plan_.limits.disk_bytes;
      auto staged = StagedInput::Create(
          spec_.input_dir, StagedInputPath(options_.state_root, report_.run_id), limits);
      if (!staged.ok()) return staged.status().With("input");
      staged_input_ = std::move(staged).value();
      request_.input_dir = staged_input_->path();
    }
    return Status::Ok();
  }

  // 4-6. The start event, the run, what came out validated (and delivered), the end event. The
  //    result is withheld (and a delivery taken back) when the end cannot be recorded; the owner
  //    record goes only once the run's end is recorded (or nothing started).
  RunReport RunAudited() {
    audit::RunStart start;
    start.run_id = report_.run_id;
    start.requester = spec_.requester;
    start.policy_name = plan_.policy_name;
    start.policy_source_digest = plan_.source_digest;
    start.plan_digest = report_.plan_digest;
    start.backend = report_.backend;
    start.backend_mode = plan_.backend == plan::Backend::kGvisor ? plan_.gvisor.platform : "";
    start.argv = spec_.argv;
    start.start_time_ns = NowNs();
    start.purpose = spec_.session != nullptr
                        ? audit::SessionExecPurpose(spec_.session_id, spec_.session_exec)
                        : spec_.purpose;

    audit::AuditFailure failure = audit::AuditFailure::kBeforeRun;
    auto end = audit::RunAudited(
        log_, start, [this] { return RunAndValidate(); }, &failure);
    if (!end.ok()) {
      Withhold(
          failure == audit::AuditFailure::kBeforeRun ? Verdict::kRefused : Verdict::kSetupError,
          end.status().message());
    }
    if (end.ok() || failure == audit::AuditFailure::kBeforeRun) {
      record_.Remove().ok();
    } else {
      record_.Abandon();  // an unended run keeps its record for recovery
    }
    return std::move(report_);
  }

  // The one refusal path: recorded (the reason says when it could not be), then reported.
  RunReport Refused(const std::string& reason) {
    report_.verdict = Verdict::kRefused;
    report_.exit_status = kExitRefused;
    report_.reason = reason;
    Runner::RecordRefusal(log_, spec_, &report_).ok();
    return std::move(report_);
  }

 private:
  int Cancelled() const {
    return spec_.cancel != nullptr ? spec_.cancel->load(std::memory_order_acquire) : 0;
  }
  std::string CancelReason() const {
    std::string why = spec_.cancel_reason ? spec_.cancel_reason() : "";
    return why.empty() ? "cancelled by the caller" : why;
  }
  bool OutputRejected() const {
    return (report_.stdout_report && report_.stdout_report->rejected) ||
           (report_.stderr_report && report_.stderr_report->rejected);
  }

  // Inside the audited section: the driver's run and everything decided from its result.
  audit::RunEnd RunAndValidate() {
    if (spec_.on_started) spec_.on_started();
    output::OutputFiles files(*validators_, plan_.outputs);
    request_.collect_output = [&files](const plan::Mount& m, int dirfd) {
      files.Collect(m, dirfd);
    };
    auto result = RunInSandbox();
    audit::RunEnd end;
    end.end_time_ns = NowNs();
    if (!result.ok()) {
      // The caller gets the first line (safex's words); the record gets the backend's own text
      // that follows it too (drivers/driver.h).
      const std::string& message = result.status().message();
      report_.verdict = Verdict::kSetupError;
      report_.exit_status = kExitRefused;
      report_.reason = "sandbox setup failed: " + message.substr(0, message.find('\n'));
      end.verdict = report_.verdict;
      end.error = "sandbox setup failed: " + message;
      return end;
    }
    drivers::RunResult& r = *result;
    report_.backend_mode = r.backend_mode;
    if (!r.enforcement.fields.empty()) {
      report_.enforcement = EnforcementToJson(r.enforcement);
      end.enforcement = report_.enforcement.dump();
    }
    if (r.refused_by_enforcement) {
      // The sandbox existed but did not hold what the plan says: refused before the program
      // started, with the evidence that shows why (drivers/enforcement.h).
      report_.verdict = Verdict::kRefused;
      report_.exit_status = kExitRefused;
      report_.reason = r.backend_error + "; nothing ran";
      end.verdict = report_.verdict;
      end.error = report_.reason;
      return end;
    }
    report_.verdict = r.interrupted ? Verdict::kInterrupted : VerdictOf(r);
    if (spec_.session != nullptr && r.exit_code < 0 && r.term_signal == 0 && !r.interrupted) {
      // No status: the session's sandbox itself ended under the command.
      report_.reason =
          "the session's sandbox ended during the command (a command ended its init, or its "
          "memory ran out); the session is closed";
    }
    if (r.limit != drivers::LimitHit::kNone) {
      report_.limits_fired.push_back(drivers::LimitHitName(r.limit));
    }
    Validate(r, files);
    const int cancel = Cancelled();
    // Stopped because the output streamed so far was rejected: the whole captured output holds
    // what was rejected, so its validation says so again and decides the verdict.
    if (r.interrupted && cancel == kCancelForOutput && OutputRejected()) {
      report_.verdict = Verdict::kValidatorRejected;
    }
    if (report_.reason.empty() && output_dir_.valid()) Deliver(files, &end);
    report_.exit_status = ExitStatusOf(report_.verdict, r);
    if (report_.verdict == Verdict::kInterrupted) {
      if (cancel > 0 && cancel < 64) report_.exit_status = 128 + cancel;
      if (cancel == kCancelRequested) {
        report_.exit_status = 128 + SIGINT;
        report_.reason = CancelReason() + "; the sandbox was killed and removed";
      } else if (cancel == kCancelForOutput) {
        report_.reason =
            "interrupted: its streamed output was rejected, but the whole output did not "
            "reject again (a validator inconsistency; the operator's log has it)";
      } else {
        report_.reason = fmt::format(
            "interrupted: the supervisor was told to stop (signal {}); the sandbox was killed "
            "and removed",
            cancel);
      }
      end.error = report_.reason;
    }
    FillEnd(r, files, &end);
    report_.result = std::move(r);
    return end;
  }

  // The run in a pooled sandbox made from exactly this plan when the pool has one ready and the
  // request can use one (the policy's own plan, not one derived from the request's choices; its
  // input snapshot is moved into the sandbox), else in a fresh one. A pooled run's evidence is its
  // sandbox's, read back when it was made, plus which sandbox it was (so the audit log shows each
  // served one run).
  Result<drivers::RunResult> RunInSandbox() {
    if (spec_.session != nullptr) return RunInSession();
    std::unique_ptr<drivers::PreparedSandbox> sandbox;
    if (options_.sandboxes != nullptr && !derived_) {
      sandbox = options_.sandboxes->Take(plan_.policy_name, report_.plan_digest,
                                         !request_.input_dir.empty());
    }
    if (!sandbox) {
      if (probed_for_made_) SAFEX_RETURN_IF_ERROR(driver_->Probe().With("backend unavailable"));
      return RunDriver(*driver_, [&] { return driver_->Run(plan_, request_); });
    }
    const int64_t handed_ns = NowNs();
    RunReport::Pooled pooled{sandbox->id(), sandbox->created_ns(),
                             handed_ns - sandbox->created_ns()};
    auto result = RunDriver(
        *driver_, [&] { return driver_->RunPrepared(std::move(sandbox), plan_, request_); });
    if (result.ok()) {
      result->enforcement.Observed(
          "sandbox",
          fmt::format("pooled {} made {} ns idle {} ms", pooled.sandbox_id, pooled.created_ns,
                      pooled.idle_ns / 1'000'000),
          "safex serve: warm pool (each pooled sandbox serves one run; safex audit verify)");
    }
    report_.pooled = std::move(pooled);
    return result;
  }

  // A session's command: its sandbox's evidence (read back when the session opened), and which
  // session and command it was (so the audit log shows one sandbox serves one session).
  Result<drivers::RunResult> RunInSession() {
    auto result = RunDriver(*driver_, [&] { return spec_.session->Exec(request_); });
    if (result.ok()) {
      // The session's evidence, but for which sandbox it was: that is the session's to name
      // (its opening names a pooled one), and this run's is the session's command.
      result->enforcement = spec_.session->enforcement();
      std::erase_if(result->enforcement.fields,
                    [](const drivers::EnforcedField& f) { return f.name == "sandbox"; });
      result->enforcement.Observed(
          "sandbox",
          fmt::format("session {} exec {} made {} ns", spec_.session_id, spec_.session_exec,
                      spec_.session->created_ns()),
          "safex serve: sessions (one sandbox per session and caller; safex audit verify)");
    }
    return result;
  }

  // What came out is checked whatever the verdict: a run killed at its deadline still has its
  // secrets redacted before anyone sees its partial output. A rejection (streams first, then
  // files) is the reason, and the verdict where nothing more important is.
  void Validate(const drivers::RunResult& r, const output::OutputFiles& files) {
    report_.stdout_report =
        validators_->ValidateStream(plan::ValidatorTarget::kStdout, r.stdout_stream.data,
                                    r.stdout_stream.total_bytes, r.stdout_stream.truncated);
    report_.stderr_report =
        validators_->ValidateStream(plan::ValidatorTarget::kStderr, r.stderr_stream.data,
                                    r.stderr_stream.total_bytes, r.stderr_stream.truncated);
    report_.files = output::OutputFilesToJson(files);
    const output::Finding* rejection = report_.stdout_report->rejection();
    if (rejection == nullptr) rejection = report_.stderr_report->rejection();
    if (rejection == nullptr) rejection = files.rejection();
    if (rejection == nullptr) return;
    report_.reason = rejection->Summary();
    if (OutputDecidesVerdict(report_.verdict)) report_.verdict = Verdict::kValidatorRejected;
  }

  // All or nothing (output/delivery.h); a failed delivery is its own verdict where nothing more
  // important already is, and always said in the reason and the end event.
  void Deliver(const output::OutputFiles& files, audit::RunEnd* end) {
    auto delivered = files.Deliver(output_dir_.get());
    if (delivered.ok()) {
      delivery_ = std::move(delivered).value();
      return;
    }
    report_.reason = fmt::format("output files could not be delivered to {}: {}", spec_.output_dir,
                                 delivered.status().message());
    end->error = report_.reason;
    if (OutputDecidesVerdict(report_.verdict)) report_.verdict = Verdict::kDeliveryFailed;
  }

  void FillEnd(const drivers::RunResult& r, const output::OutputFiles& files,
               audit::RunEnd* end) const {
    if (r.term_signal == 0 && r.exit_code >= 0) end->exit_code = r.exit_code;
    if (r.term_signal != 0) end->signal = r.term_signal;
    end->verdict = report_.verdict;
    end->limits_fired = report_.limits_fired;
    end->wall_ns = r.wall_ns;
    end->cpu_ns = r.cpu_ns;
    end->peak_memory_bytes = r.peak_memory_bytes;
    end->stdout_summary = SummaryOf(r.stdout_stream, report_.stdout_report);
    end->stderr_summary = SummaryOf(r.stderr_stream, report_.stderr_report);
    AppendFindings(*report_.stdout_report, &end->validator_results);
    AppendFindings(*report_.stderr_report, &end->validator_results);
    for (const auto& f : files.files()) AppendFindings(f.report, &end->validator_results);
    for (const auto& f : files.refusal_findings()) {
      end->validator_results.push_back({f.subject, "rejected", f.Summary()});
    }
    if (r.denied_egress > 0) end->denied_egress.push_back({"*", r.denied_egress});
    // The backend's own words (runsc's error chain, a guest's message) are for the record, not
    // for the caller.
    if (!r.backend_error.empty() && end->error.empty()) end->error = r.backend_error;
  }

  // The run's end could not be recorded: nothing the program produced is shown without its
  // record, and files already delivered are taken back.
  void Withhold(Verdict verdict, const std::string& why) {
    report_.verdict = verdict;
    report_.exit_status = kExitRefused;
    report_.reason = why;
    if (Status rb = delivery_.Rollback(); !rb.ok()) {
      report_.reason +=
          " (and the delivered output files could not all be removed: " + rb.message() + ")";
    }
    report_.result.reset();
    report_.stdout_report.reset();
    report_.stderr_report.reset();
    report_.files.reset();
  }

  const RunnerOptions& options_;
  RunSpec spec_;
  std::optional<plan::Plan> derived_;  // the plan with the request's choices
  const plan::Plan& plan_;             // what runs: the derived plan, or the policy's
  const plan::Plan& policy_plan_;      // the policy's, which says what callers may choose
  const std::string policy_digest_;    // its digest (a session's sandbox was made from it)
  audit::AuditLog& log_;
  RunReport report_;
  UniqueFd output_dir_;
  std::optional<output::ValidatorSet> validators_;
  drivers::Driver* driver_ = nullptr;
  bool probed_for_made_ = false;  // ProbeBackend asked only what a made sandbox depends on
  drivers::RunRequest request_;
  RunRecord record_;
  std::optional<StagedInput> staged_input_;
  output::Delivery delivery_;  // the files delivered to spec.output_dir, until the end is recorded
};

}  // namespace

Status CheckCallerChoices(const plan::Plan& plan, const RunSpec& spec) {
  if (spec.wall_time_ns > plan.limits.wall_time_ns) {
    return Status::InvalidArgument(fmt::format(
        "wall_time_ms {} is more than policy {} allows ({} ms): a request may only shorten it",
        spec.wall_time_ns / 1000000, plan.policy_name, plan.limits.wall_time_ns / 1000000));
  }
  const auto& names = plan.caller.env;
  for (const auto& [k, v] : spec.env) {
    if (std::find(names.begin(), names.end(), k) == names.end()) {
      return Status::InvalidArgument(fmt::format(
          "policy {} does not let callers set the environment variable {} (its `caller` block "
          "names: {})",
          plan.policy_name, k, names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    }
    if (v.find('\0') != std::string::npos || !IsValidUtf8(v) ||
        v.size() > plan::kMaxEnvValueBytes) {
      return Status::InvalidArgument("the value of " + k +
                                     " must be UTF-8 text without NUL, at most 32KiB");
    }
  }
  if (!spec.cwd.empty()) {
    if (!plan::IsNormalAbsolutePath(spec.cwd)) {
      return Status::InvalidArgument("cwd must be an absolute, normalised path");
    }
    const bool allowed =
        std::any_of(plan.caller.cwd.begin(), plan.caller.cwd.end(), [&](const std::string& d) {
          return spec.cwd == d || d == "/" || spec.cwd.starts_with(d + "/");
        });
    if (!allowed) {
      return Status::InvalidArgument(fmt::format(
          "policy {} does not let callers work in {} (its `caller` block allows: {})",
          plan.policy_name, spec.cwd,
          plan.caller.cwd.empty() ? "none" : fmt::format("{}", fmt::join(plan.caller.cwd, ", "))));
    }
  }
  return Status::Ok();
}

std::string StagedInputPath(const std::string& state_root, const std::string& run_id) {
  return PrivateRootFor(state_root) + "/input-" + run_id;
}

Runner::Runner(RunnerOptions options) : options_(std::move(options)) {}
Runner::~Runner() = default;

RunReport Runner::Execute(const PreparedPlan& prepared, RunSpec spec, audit::AuditLog& log) {
  RunAttempt attempt(options_, prepared, std::move(spec), log);
  if (Status st = attempt.CheckRequest(); !st.ok()) return attempt.Refused(st.message());
  if (Status st = attempt.ChooseBackend(); !st.ok()) return attempt.Refused(st.message());
  if (Status st = attempt.Prepare(); !st.ok()) return attempt.Refused(st.message());
  return attempt.RunAudited();
}

Status Runner::RecordRefusal(audit::AuditLog& log, const RunSpec& spec, RunReport* report,
                             uint64_t max_argv_bytes) {
  audit::Refusal r;
  r.run_id = report->run_id;
  r.requester = spec.requester;
  r.policy_name = report->policy_name;
  r.policy_source_digest = report->policy_source_digest;
  r.plan_digest = report->plan_digest;
  r.reason = report->reason.empty() ? "refused" : report->reason;
  r.purpose = spec.purpose;
  uint64_t total = 0;
  for (const std::string& a : spec.argv) total += a.size();
  if (max_argv_bytes == 0 || total <= max_argv_bytes) {
    r.argv = spec.argv;
  } else {
    uint64_t kept = 0;
    for (const std::string& a : spec.argv) {
      if (kept + a.size() > max_argv_bytes) break;
      kept += a.size();
      r.argv.push_back(a);
    }
    Sha256Hasher whole;
    for (const std::string& a : spec.argv) {
      whole.Update(std::to_string(a.size()) + ":");  // length-prefixed: no two argvs collide
      whole.Update(a);
    }
    r.reason += fmt::format(
        " [argv cut for the record: {} of {} arguments, {} of {} bytes kept; SHA-256 of the "
        "whole argv (each argument as <length>:<bytes>) {}]",
        r.argv.size(), spec.argv.size(), kept, total, whole.FinishHex());
  }
  audit::EventRef ref;
  Status st = log.RecordRefusal(r, &ref);
  if (!st.ok()) {
    report->reason += " (and the refusal could not be recorded: " + st.message() + ")";
  }
  return st;
}

}  // namespace safex::supervisor
