#include "supervisor/runner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "audit/audited_run.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
#include "compiler/compiler.h"
#include "drivers/gvisor/gvisor_driver.h"
#include "drivers/microvm/microvm_driver.h"
#include "plan/plan_json.h"
#include "plan/verify.h"
#include "supervisor/input_stage.h"
#include "supervisor/output/escape.h"
#include "supervisor/output/report_json.h"
#include "supervisor/private_dir.h"
#include "supervisor/run_record.h"

namespace safex::supervisor {
namespace {

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

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
    return Status::InvalidArgument(std::string(what) + " " + path + " is not a directory");
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
Result<drivers::RunResult> RunDriver(drivers::Driver& driver, const plan::Plan& plan,
                                     const drivers::RunRequest& request) {
  try {
    return driver.Run(plan, request);
  } catch (const std::exception& e) {
    return Status::Internal(std::string(driver.name()) + " driver failed: " + e.what());
  } catch (...) {
    return Status::Internal(std::string(driver.name()) + " driver failed with an unknown error");
  }
}

}  // namespace

std::string StagedInputPath(const std::string& state_root, const std::string& run_id) {
  return PrivateRootFor(state_root) + "/input-" + run_id;
}

Result<PreparedPlan> PreparePlan(const std::string& policy_path,
                                 const std::vector<std::string>& search_path,
                                 const plan::Ceilings& ceilings, RunReport* report) {
  compiler::CompileOptions options;
  options.search_path = search_path;
  options.ceilings = ceilings;
  compiler::CompileResult compiled = compiler::CompileFile(policy_path, options);
  if (!compiled.ok()) {
    report->verdict = Verdict::kRefused;
    report->exit_status = kExitRefused;
    report->diagnostics = compiler::RenderAll(compiled);
    report->reason = "policy " + policy_path + " does not compile (" +
                     std::to_string(compiled.errors()) + " errors)";
    return Status::InvalidArgument(report->reason);
  }
  report->policy_name = compiled.plan->policy_name;
  report->policy_source_digest = compiled.plan->source_digest;
  auto prepared = VerifyPlanJson(plan::ToCanonicalJson(*compiled.plan), ceilings);
  if (!prepared.ok()) {
    report->verdict = Verdict::kRefused;
    report->exit_status = kExitRefused;
    report->reason = prepared.status().message();
    return prepared.status();
  }
  report->plan_digest = prepared->digest;
  return prepared;
}

Result<PreparedPlan> VerifyPlanJson(std::string_view json, const plan::Ceilings& ceilings) {
  auto read_back = plan::PlanFromJson(json);
  if (!read_back.ok()) return read_back.status().With("plan refused");
  std::vector<plan::Violation> violations = plan::Verify(*read_back, ceilings);
  if (!violations.empty()) {
    std::string msg = "plan refused: ";
    for (size_t i = 0; i < violations.size(); ++i) {
      if (i > 0) msg += "; ";
      msg += violations[i].code + " " + violations[i].field + ": " + violations[i].message;
    }
    return Status::FailedPrecondition(msg);
  }
  PreparedPlan out{std::move(read_back).value(), ""};
  out.digest = plan::PlanDigest(out.plan);
  return out;
}

Runner::Runner(RunnerOptions options) : options_(std::move(options)) {}
Runner::~Runner() = default;

Result<drivers::Driver*> Runner::DriverFor(plan::Backend backend) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = drivers_.find(backend);
  if (it != drivers_.end()) return it->second.get();
  std::unique_ptr<drivers::Driver> d;
  switch (backend) {
    case plan::Backend::kGvisor: {
      drivers::GvisorOptions g;
      g.runsc_path = options_.runsc_path;
      g.state_root = options_.state_root;
      g.cgroup_parent = options_.cgroup_parent;
      g.network_provider = options_.network_provider;
      d = std::make_unique<drivers::GvisorDriver>(std::move(g));
      break;
    }
    case plan::Backend::kMicrovm: {
      // Its image cache and KVM probe live in /var/lib/safex/microvm (persistent, not /run).
      drivers::MicrovmOptions m;
      m.cgroup_parent = options_.cgroup_parent;
      m.network_provider = options_.network_provider;
      d = std::make_unique<drivers::MicrovmDriver>(std::move(m));
      break;
    }
    case plan::Backend::kNative:
      // Fail closed: a backend this build cannot provide refuses; it never falls back.
      return Status::Unavailable(std::string("backend ") + plan::BackendName(backend) +
                                 " is not available in this build of safex");
  }
  drivers::Driver* raw = d.get();
  drivers_.emplace(backend, std::move(d));
  return raw;
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
    r.reason += " [argv cut for the record: " + std::to_string(r.argv.size()) + " of " +
                std::to_string(spec.argv.size()) + " arguments, " + std::to_string(kept) + " of " +
                std::to_string(total) + " bytes kept; SHA-256 of the whole argv " +
                "(each argument as <length>:<bytes>) " + whole.FinishHex() + "]";
  }
  audit::EventRef ref;
  Status st = log.RecordRefusal(r, &ref);
  if (!st.ok()) {
    report->reason += " (and the refusal could not be recorded: " + st.message() + ")";
  }
  return st;
}

RunReport Runner::Execute(const PreparedPlan& prepared, RunSpec spec, audit::AuditLog& log) {
  const plan::Plan& plan = prepared.plan;
  RunReport report;
  report.run_id = spec.run_id.empty() ? audit::NewRunId() : spec.run_id;
  report.policy_name = plan.policy_name;
  report.policy_source_digest = plan.source_digest;
  report.plan_digest = prepared.digest;
  report.backend = plan::BackendName(plan.backend);

  auto refuse = [&](Verdict v, const std::string& why) {
    report.verdict = v;
    report.exit_status = kExitRefused;
    report.reason = why;
    RecordRefusal(log, spec, &report).ok();  // the reason says when it could not be recorded
    return report;
  };

  // 1. The request against the plan.
  if (spec.argv.empty()) return refuse(Verdict::kRefused, "empty argv: nothing to run");
  if (!spec.input_dir.empty()) {
    if (FindMount(plan, plan::MountKind::kInput) == nullptr) {
      return refuse(Verdict::kRefused, "an input directory was given but policy " +
                                           plan.policy_name + " has no input mount");
    }
    if (Status st = CheckDirectory(spec.input_dir, "input directory"); !st.ok()) {
      return refuse(Verdict::kRefused, st.message());
    }
  }
  UniqueFd output_dir;
  if (!spec.output_dir.empty()) {
    if (FindMount(plan, plan::MountKind::kOutput) == nullptr) {
      return refuse(Verdict::kRefused, "an output directory was given but policy " +
                                           plan.policy_name + " has no output mount");
    }
    auto fd = OpenOutputDir(spec.output_dir);
    if (!fd.ok()) return refuse(Verdict::kRefused, fd.status().message());
    output_dir = std::move(fd).value();
  }
  auto validators = output::ValidatorSet::Compile(plan.validators);
  if (!validators.ok()) {
    return refuse(Verdict::kRefused, "validators: " + validators.status().message());
  }

  // 2. The backend named by the plan, and nothing else.
  auto driver = DriverFor(plan.backend);
  if (!driver.ok()) return refuse(Verdict::kRefused, driver.status().message());
  if (Status st = (*driver)->Probe(); !st.ok()) {
    return refuse(Verdict::kRefused, "backend unavailable: " + st.message());
  }

  // What the driver will be asked to run; the backend refuses what it cannot carry faithfully
  // before anything exists (no record, no start event, nothing to clean up).
  drivers::RunRequest request;
  request.run_id = report.run_id;
  request.argv = spec.argv;
  request.stdin_data = std::move(spec.stdin_data);
  request.cancel = spec.cancel;
  if (Status st = (*driver)->CheckRequest(plan, request); !st.ok()) {
    return refuse(Verdict::kRefused, st.message());
  }

  auto cancelled = [&spec]() {
    return spec.cancel != nullptr ? spec.cancel->load(std::memory_order_relaxed) : 0;
  };
  if (int sig = cancelled(); sig != 0) {
    return refuse(Verdict::kRefused,
                  "interrupted before the run started (signal " + std::to_string(sig) + ")");
  }

  if (Status st = PrepareStateRoot(options_.state_root); !st.ok()) {
    return refuse(Verdict::kRefused, "state root: " + st.message());
  }

  // The owner record: from before the start event until after the end event, so that a crash
  // anywhere in between is found and closed by recovery (supervisor/run_record.h).
  RunRecord record;
  if (!options_.records_dir.empty()) {
    RunRecordInfo info;
    info.run_id = report.run_id;
    info.pid = getpid();
    info.audit_db = options_.audit_db;
    info.state_root = options_.state_root;
    info.input_dir = spec.owned_dir;
    info.start_ns = NowNs();
    auto created = RunRecord::Create(options_.records_dir, info);
    if (!created.ok()) {
      return refuse(Verdict::kRefused, "run record: " + created.status().message());
    }
    record = std::move(created).value();
  }

  // The input is a read-only snapshot of the caller's directory (supervisor/input_stage.h), made
  // after the record exists (a crash from here on is found and its snapshot removed) and below
  // the state root's private directory, which no other host user can traverse.
  std::optional<StagedInput> staged_input;
  if (!spec.input_dir.empty()) {
    InputLimits limits;
    limits.max_bytes = plan.limits.disk_bytes;
    auto staged = StagedInput::Create(spec.input_dir,
                                      StagedInputPath(options_.state_root, report.run_id), limits);
    if (!staged.ok()) return refuse(Verdict::kRefused, "input: " + staged.status().message());
    staged_input = std::move(staged).value();
  }

  // 3-6. Start event, run, validation, end event.
  audit::RunStart start;
  start.run_id = report.run_id;
  start.requester = spec.requester;
  start.policy_name = plan.policy_name;
  start.policy_source_digest = plan.source_digest;
  start.plan_digest = prepared.digest;
  start.backend = report.backend;
  start.backend_mode = plan.backend == plan::Backend::kGvisor ? plan.gvisor.platform : "";
  start.argv = spec.argv;
  start.start_time_ns = NowNs();

  output::OutputFiles files(*validators, plan.outputs);
  output::Delivery delivery;  // the files delivered to spec.output_dir, until the end is recorded
  auto run = [&]() -> audit::RunEnd {
    audit::RunEnd end;
    request.input_dir = staged_input ? staged_input->path() : "";
    request.collect_output = [&files](const plan::Mount& m, int dirfd) { files.Collect(m, dirfd); };

    auto result = RunDriver(**driver, plan, request);
    end.end_time_ns = NowNs();
    if (!result.ok()) {
      report.verdict = Verdict::kSetupError;
      report.exit_status = kExitRefused;
      report.reason = "sandbox setup failed: " + result.status().message();
      end.verdict = report.verdict;
      end.error = report.reason;
      return end;
    }
    drivers::RunResult& r = *result;
    report.backend_mode = r.backend_mode;
    report.verdict = r.interrupted ? Verdict::kInterrupted : VerdictOf(r);
    if (r.limit != drivers::LimitHit::kNone) {
      report.limits_fired.push_back(drivers::LimitHitName(r.limit));
    }

    // What came out is checked whatever the verdict: a run killed at its deadline still has its
    // secrets redacted before anyone sees its partial output.
    report.stdout_report =
        validators->ValidateStream(plan::ValidatorTarget::kStdout, r.stdout_stream.data,
                                   r.stdout_stream.total_bytes, r.stdout_stream.truncated);
    report.stderr_report =
        validators->ValidateStream(plan::ValidatorTarget::kStderr, r.stderr_stream.data,
                                   r.stderr_stream.total_bytes, r.stderr_stream.truncated);
    report.files = output::OutputFilesToJson(files);
    const output::Finding* rejection = report.stdout_report->rejection();
    if (rejection == nullptr) rejection = report.stderr_report->rejection();
    if (rejection == nullptr) rejection = files.rejection();
    if (rejection != nullptr) {
      report.reason = rejection->Summary();
      // A limit that stopped the run is the more important fact; otherwise the rejection is.
      if (report.verdict == Verdict::kOk || report.verdict == Verdict::kNonzeroExit) {
        report.verdict = Verdict::kValidatorRejected;
      }
    } else if (output_dir.valid()) {
      // All or nothing (output/delivery.h); a failed delivery is its own verdict where nothing
      // more important (a limit) already is, and always said in the reason.
      auto delivered = files.Deliver(output_dir.get());
      if (delivered.ok()) {
        delivery = std::move(delivered).value();
      } else {
        report.reason = "output files could not be delivered to " + spec.output_dir + ": " +
                        delivered.status().message();
        end.error = report.reason;
        if (report.verdict == Verdict::kOk || report.verdict == Verdict::kNonzeroExit) {
          report.verdict = Verdict::kDeliveryFailed;
        }
      }
    }
    report.exit_status = ExitStatusOf(report.verdict, r);
    if (report.verdict == Verdict::kInterrupted) {
      int sig = cancelled();
      if (sig > 0 && sig < 64) report.exit_status = 128 + sig;
      report.reason = "interrupted: the supervisor was told to stop (signal " +
                      std::to_string(sig) + "); the sandbox was killed and removed";
      end.error = report.reason;
    }

    if (r.term_signal == 0 && r.exit_code >= 0) end.exit_code = r.exit_code;
    if (r.term_signal != 0) end.signal = r.term_signal;
    end.verdict = report.verdict;
    end.limits_fired = report.limits_fired;
    end.wall_ns = r.wall_ns;
    end.cpu_ns = r.cpu_ns;
    end.peak_memory_bytes = r.peak_memory_bytes;
    end.stdout_summary = SummaryOf(r.stdout_stream, report.stdout_report);
    end.stderr_summary = SummaryOf(r.stderr_stream, report.stderr_report);
    AppendFindings(*report.stdout_report, &end.validator_results);
    AppendFindings(*report.stderr_report, &end.validator_results);
    for (const auto& f : files.files()) AppendFindings(f.report, &end.validator_results);
    for (const auto& f : files.refusal_findings()) {
      end.validator_results.push_back({f.subject, "rejected", f.Summary()});
    }
    if (r.denied_egress > 0) end.denied_egress.push_back({"*", r.denied_egress});
    report.result = std::move(r);
    return end;
  };

  audit::AuditFailure failure = audit::AuditFailure::kBeforeRun;
  auto end = audit::RunAudited(log, start, run, &failure);
  if (!end.ok()) {
    report.verdict =
        failure == audit::AuditFailure::kBeforeRun ? Verdict::kRefused : Verdict::kSetupError;
    report.exit_status = kExitRefused;
    report.reason = end.status().message();
    // The result is withheld: nothing the program produced is shown without its record, and
    // files already delivered are taken back.
    if (Status rb = delivery.Rollback(); !rb.ok()) {
      report.reason +=
          " (and the delivered output files could not all be removed: " + rb.message() + ")";
    }
    report.result.reset();
    report.stdout_report.reset();
    report.stderr_report.reset();
    report.files.reset();
  }
  // After the end event (or its failure): an unended run keeps its record for recovery.
  if (end.ok() || failure == audit::AuditFailure::kBeforeRun) {
    record.Remove().ok();
  } else {
    record.Abandon();
  }
  return report;
}

nlohmann::json ReportToJson(const RunReport& report) {
  using nlohmann::json;
  json j;
  j["run_id"] = report.run_id;
  j["verdict"] = std::string(VerdictName(report.verdict));
  j["exit_status"] = report.exit_status;
  j["reason"] = output::EscapeForLog(report.reason);
  j["policy"] = report.policy_name;
  j["policy_source_digest"] = report.policy_source_digest;
  j["plan_digest"] = report.plan_digest;
  j["backend"] = report.backend;
  j["backend_mode"] = report.backend_mode;
  j["limits_fired"] = report.limits_fired;
  if (!report.diagnostics.empty()) j["diagnostics"] = output::EscapeForLog(report.diagnostics);
  if (report.result) {
    const drivers::RunResult& r = *report.result;
    j["exit_code"] = r.term_signal == 0 && r.exit_code >= 0 ? json(r.exit_code) : json(nullptr);
    j["signal"] = r.term_signal != 0 ? json(r.term_signal) : json(nullptr);
    j["limit"] = drivers::LimitHitName(r.limit);
    j["limit_detail"] = r.limit_detail;
    j["wall_ns"] = r.wall_ns;
    j["cpu_ns"] = r.cpu_ns;
    j["peak_memory_bytes"] = r.peak_memory_bytes;
    j["denied_egress"] = r.denied_egress;
    auto stream = [](const drivers::CapturedStream& s,
                     const std::optional<output::ValidationReport>& v) {
      json o;
      o["bytes"] = s.total_bytes;
      o["captured_bytes"] = s.data.size();
      o["truncated"] = s.truncated || (v && v->truncated);
      if (v) {
        o["sha256"] = v->raw_sha256;
        o["delivered_sha256"] = v->delivered_sha256;
        o["rejected"] = v->rejected;
        // Delivered bytes may be any bytes the policy allowed; JSON needs UTF-8, so invalid
        // sequences are shown as U+FFFD here (the digest above is of the real bytes).
        o["text"] = v->delivered;
        o["validation"] = output::ReportToJson(*v);
      }
      return o;
    };
    j["stdout"] = stream(r.stdout_stream, report.stdout_report);
    j["stderr"] = stream(r.stderr_stream, report.stderr_report);
    if (report.files) j["files"] = *report.files;
  } else {
    j["exit_code"] = nullptr;
    j["signal"] = nullptr;
  }
  return j;
}

}  // namespace safex::supervisor
