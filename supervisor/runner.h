// The life of one run, shared by `safex run` (the CLI) and `safex serve` (the daemon):
//
//   PreparePlan   policy -> plan, re-read from its own canonical JSON and verified again
//   Runner::Execute
//     1. request checks (argv, input/output against the plan's mounts), validators compiled
//     2. backend chosen by the plan and probed: unusable -> refused, never a weaker backend
//     3. start event committed to the audit log (else refused: nothing runs without a record)
//     4. driver run (fresh sandbox, limits, capture, collection of output mounts, teardown)
//     5. validation of what came out (streams and files)
//     6. end event committed; only then is the report returned to be shown to the caller
//
// Refusals at any step before 3 are recorded as refusal events where the log is usable.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "drivers/backends.h"
#include "drivers/driver.h"
#include "plan/ceilings.h"
#include "plan/plan.h"
#include "supervisor/output/output_files.h"
#include "supervisor/output/stream_validator.h"
#include "supervisor/verdict.h"

namespace safex::supervisor {

// Where sandboxes made ahead of their request come from (the service's warm pool,
// serve/sandbox_pool.h). Take gives one made from exactly the plan with `plan_digest` for
// `policy_name` (one that takes an input directory if `with_input`) and never gives the same one
// twice, or nullptr (then the run makes its own).
class SandboxSource {
 public:
  virtual ~SandboxSource() = default;
  virtual std::unique_ptr<drivers::PreparedSandbox> Take(const std::string& policy_name,
                                                         const std::string& plan_digest,
                                                         bool with_input) = 0;
  // Whether a Take with the same arguments would find one ready now (not counting one still
  // booting). The run then probes its backend only for what a made sandbox depends on
  // (Driver::ProbeForMadeSandbox); if its Take finds none after all (another run took it first),
  // it probes fully before it makes its own.
  virtual bool HasReady(const std::string& policy_name, const std::string& plan_digest,
                        bool with_input) const = 0;
};

struct RunnerOptions {
  // Where input is staged (<state_root>/private, private_dir.h); the gVisor driver of `backends`
  // keeps its per-run state here too.
  std::string state_root = "/run/safex";
  // The host's isolation backends (drivers/backends.h). REQUIRED; must outlive the Runner.
  drivers::Backends* backends = nullptr;
  // Where each run's durable owner record is kept (supervisor/run_record.h), normally
  // RecordsDirFor(audit db). Empty: no records (in-memory logs, unit tests).
  std::string records_dir;
  // The audit log path written into each record (which log recovery must close the run in).
  std::string audit_db;
  // Pooled sandboxes (nullptr: every run makes its own). Used for a run of the policy's own plan
  // (no per-request choices) without input files; must outlive the Runner.
  SandboxSource* sandboxes = nullptr;
};

// Values of RunSpec::cancel besides signal numbers.
// A caller asked for the run to stop (the runs API: DELETE, or a waiting client went away):
// verdict interrupted, exit status 130, the reason from RunSpec::cancel_reason.
inline constexpr int kCancelRequested = 1000;
// The output, validated while the run went on, was rejected (a reject pattern or size cap):
// the run is stopped at once and ends validator-rejected with the rejecting finding.
inline constexpr int kCancelForOutput = 1001;

// What the caller asked for, besides the policy.
struct RunSpec {
  std::vector<std::string> argv;
  std::optional<std::string> stdin_data;
  std::string input_dir;   // "" : none
  std::string output_dir;  // "" : output files are validated but not delivered
  audit::Requester requester;
  std::string run_id;  // "" : a fresh audit::NewRunId(); otherwise [a-z0-9-], unique
  // Set non-zero (the signal number) from any thread to stop the run: the sandbox is killed and
  // torn down, and the run ends with verdict `interrupted` and exit status 128 + the value.
  // Set before the run starts: the request is refused. nullptr: never.
  const std::atomic<int>* cancel = nullptr;
  // With cancel == kCancelRequested: who asked, for the reason and the end event (e.g.
  // "cancelled by uid 1000"). Empty: "cancelled by the caller".
  std::function<std::string()> cancel_reason;
  // Called once the run's start event is committed, just before the sandbox is made: from here
  // on a cancel ends the run interrupted (before it, refused: nothing ran). Empty: nobody.
  std::function<void()> on_started;
  // Sees the program's output as the backend captures it (drivers/driver.h). Empty: nobody.
  drivers::OutputObserver on_output;
  // A directory made for this run alone that crash recovery removes if the owner dies (the
  // daemon's per-run input directory). Recorded in the run record; Execute does not remove it.
  std::string owned_dir;
  // A shorter wall-time limit than the plan's, for this run only (0: the plan's). Never longer:
  // a larger value is refused. The run then enforces a derived plan (the plan with
  // limits.wall_time lowered), and its records carry that plan's digest.
  uint64_t wall_time_ns = 0;
  // Choices the plan lets a caller make (plan::CallerChoices): environment variables (names the
  // plan lists; added, or replacing the plan's value) and a working directory (one the plan
  // lists, or below one). Anything else is refused. The run then enforces a derived plan.
  std::map<std::string, std::string> env;
  std::string cwd;  // "" : the plan's
  // Recorded with the run (audit::RunStart::purpose): "test POLICY/NAME" for `safex test`.
  std::string purpose;
  // A command of an agent session (serve/session_table.h): it runs in this session's sandbox,
  // made from exactly the plan Execute is given (a plan of another digest is refused), instead of
  // a fresh one; its purpose is audit::SessionExecPurpose(session_id, session_exec). Per-run
  // choices (env, cwd, wall time) and input directories are refused: the sandbox was made before
  // them. The caller holds the session for the run. nullptr: an ordinary run.
  drivers::SessionSandbox* session = nullptr;
  std::string session_id;
  uint64_t session_exec = 0;
};

// Everything the caller is told about a run, refused or not.
struct RunReport {
  std::string run_id;
  Verdict verdict = Verdict::kRefused;
  int exit_status = kExitRefused;
  std::string reason;       // refused / setup-error / validator-rejected: why, one line
  std::string diagnostics;  // rendered policy diagnostics (compile failures)
  std::string policy_name;
  std::string policy_source_digest;
  std::string plan_digest;
  std::string backend;
  std::string backend_mode;
  std::vector<std::string> limits_fired;
  std::optional<drivers::RunResult> result;  // set when the program ran
  std::optional<output::ValidationReport> stdout_report;
  std::optional<output::ValidationReport> stderr_report;
  std::optional<nlohmann::json> files;  // output files collected (output::OutputFilesToJson)
  // What the backend read back before the program started (EnforcementToJson); null when the
  // run got no further than the checks before its sandbox existed.
  nlohmann::json enforcement;
  bool ran() const { return result.has_value(); }
  // Set when the run was handed a pooled sandbox: its id, when it was made (CLOCK_REALTIME ns)
  // and how long it had waited (ns).
  struct Pooled {
    std::string sandbox_id;
    int64_t created_ns = 0;
    int64_t idle_ns = 0;
  };
  std::optional<Pooled> pooled;
};

// A compiled plan, re-verified from its own canonical JSON.
struct PreparedPlan {
  plan::Plan plan;
  std::string digest;
};

// Compiles `policy_path` and verifies the plan again from the bytes the compiler emitted, so a
// compiler bug cannot hand the driver a plan the verifier would refuse. On failure, `report` is a
// refusal (with rendered diagnostics where there are some).
Result<PreparedPlan> PreparePlan(const std::string& policy_path,
                                 const std::vector<std::string>& search_path,
                                 const plan::Ceilings& ceilings, RunReport* report);

// Whether `spec`'s per-run choices (wall time, env, cwd) stay within what `plan` allows; the
// message names the first that does not. The Runner refuses such a request; the service answers
// it 400 before it runs.
Status CheckCallerChoices(const plan::Plan& plan, const RunSpec& spec);

// Re-verifies a plan received as JSON (e.g. `safex compile` output).
Result<PreparedPlan> VerifyPlanJson(std::string_view json, const plan::Ceilings& ceilings);

class Runner {
 public:
  explicit Runner(RunnerOptions options);
  ~Runner();

  // Runs `spec` under `prepared`, recording it in `log`. Never throws; every outcome, refusals
  // included, is a RunReport. Thread-safety: concurrent calls are allowed with distinct logs.
  // `spec` is taken by value: its stdin (up to 64 MiB) moves into the driver's request
  // instead of being copied.
  RunReport Execute(const PreparedPlan& prepared, RunSpec spec, audit::AuditLog& log);

  // Records a refusal of a request that never got as far as a plan (bad policy, busy service).
  // `max_argv_bytes` (0: no bound) bounds the argv kept in the record: whole arguments are kept
  // while they fit, and the recorded reason says how many were cut and gives the SHA-256 of the
  // whole argv (refusals of hostile callers must not fill the log). Returns the log's error when
  // the refusal could not be recorded; report->reason then says so too.
  static Status RecordRefusal(audit::AuditLog& log, const RunSpec& spec, RunReport* report,
                              uint64_t max_argv_bytes = 0);

 private:
  RunnerOptions options_;
};

// Where Execute snapshots a run's input: <state_root>/private/input-<run id> (private_dir.h).
std::string StagedInputPath(const std::string& state_root, const std::string& run_id);

// The one-object JSON form of a report (`safex run --json`, the daemon's response body).
nlohmann::json ReportToJson(const RunReport& report);

// A run's evidence (drivers/enforcement.h) as recorded in its end event and shown by
// `safex run --json` and `safex audit show`: {"fields": [{"name", "state", "expected",
// "observed", "source", "probe"}...]} (docs/audit.md, "Evidence").
nlohmann::json EnforcementToJson(const drivers::Enforcement& e);

}  // namespace safex::supervisor
