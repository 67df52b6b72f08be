// The containment suite: every case of /work/shared/attack-catalogue.md
// (tests/containment/cases.cc) on every isolation backend, through the built `safex run`, checked
// against the expected contained outcome, the verdict and exit status, the audit log, the host, and
// leftovers.
//
//   Suite suite(options);
//   suite.SetUp();                 // probes copied, listeners, canaries, host baseline
//   suite.DiscoverBackends();      // one trivial run per backend: available or not, and why
//   suite.RunAll();                // every case x available backend, `jobs` at a time
//   suite.CheckHost();             // hashes, free space, kernel settings, leaks, audit chain
//   suite.WriteReport(path);       // docs/containment.md
//
// Adding a backend column is one line: kBackends below.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "common/subprocess.h"
#include "tests/containment/host_listeners.h"
#include "tests/containment/process_runner.h"

namespace safex::testing::net {
class World;
}

namespace safex::containment {

// Every backend gets a column; one that this build or host cannot run says so in it.
// Native runs trusted code only: its column runs each case under the same policy with `trust`
// and `isolation` overridden (WrapperPolicy), so that what its mechanisms contain is shown; the
// untrusted policies themselves are refused there at plan time (DiscoverBackends shows it).
inline const std::vector<std::string> kBackends = {"gvisor", "microvm", "native"};

// A column of the table: a backend, reached through `safex run`, or through `safex submit` to a
// `safex serve` the suite runs (the cases whose runs the service can take: no output directory,
// no `safex run` flags, no egress).
struct Column {
  std::string name;
  std::string backend;
  bool submit = false;
  // Through the service too, as the second command of an agent session whose first command
  // tried to leave something behind for it (kPersistAttempt in suite.cc).
  bool session = false;
  // gVisor's platform, set in every run's wrapper policy (`gvisor { platform = ... }`); empty:
  // the example policy's own (systrap).
  std::string platform;
};
// The submit column's service keeps a warm pool for the suite's two gVisor wrapper policies
// (the plain python-untrusted and base-untrusted wrappers, which most cases use): each of their
// runs without input files waits for a pooled sandbox and must have been run in one, so the
// column shows the catalogue contained by pooled sandboxes (docs/operating.md, "The warm pool").
inline const std::vector<Column> kColumns = {
    {"gvisor", "gvisor", false},
    {"microvm", "microvm", false},
    {"native (as trusted)", "native", false},
    {"gvisor, submit (pooled)", "gvisor", true},
    {"gvisor, session (2nd command)", "gvisor", true, true},
    {"gvisor (ptrace)", "gvisor", false, false, "ptrace"}};

// One `safex run` of a case.
struct Invocation {
  std::string label;                        // shown in the details ("heap", "fifo", ...)
  std::string policy = "python-untrusted";  // the example policy the run's wrapper extends
  std::string policy_extra;                 // statements added to the wrapper (overrides)
  std::vector<std::string> argv;            // argv[0]: a probe name (-> /probes/NAME) or a path
  bool input = false;                       // --input: the case's host input directory
  bool output = false;                      // --output: the case's host output directory
  std::vector<std::string> flags;           // more `safex run` flags (S7 breaks things here)
  bool readonly_cgroups = false;            // safex sees every cgroup filesystem read-only
  bool expect_refusal = false;              // must be refused before anything runs
  bool expect_probe_line = true;            // the probe's JSON line must be in stdout
  int group = 0;                            // same non-zero group: started together
  int start_delay_ms = 0;                   // delay within its group
  // Runs on the host while the run goes on, `during_delay_ms` after it started, with the state
  // directory its sandbox uses (S8: another local user looks at what is staged for it).
  std::function<void(const std::string& state_root)> during;
  int during_delay_ms = 0;

  // Why `safex submit` cannot make this run ("" when it can).
  std::string SubmitUnsupported() const;
  // Why a session's command cannot be this run ("" when it can).
  std::string SessionUnsupported() const;
};

// What one invocation produced.
struct RunRecord {
  Invocation inv;
  ProcessResult proc;
  std::string policy_path;
  nlohmann::json report;  // `safex run --json`, or null when stdout was not JSON
  nlohmann::json probe;   // the probe's last JSON line in the delivered stdout, or null
  std::optional<audit::RunDetail> audit;
  std::string audit_error;
  std::vector<std::string> leftovers;  // resources still naming the run id after safex exited
  std::string input_dir, output_dir;
  bool expect_pooled = false;  // the submit column: a pooled policy's run without input files
  std::string sandbox_id;      // the pooled sandbox the service ran it in ("" : its own)

  std::string verdict() const;
  std::string run_id() const;
  std::string Obs(const std::string& key) const;  // probe obs[key] as text ("" if absent)
  int64_t ObsInt(const std::string& key, int64_t missing = -1) const;
  std::string ProbeResult() const;
  std::string Reason() const;
  std::string StdoutText() const;
  // One line on how the run went (exit, times, verdict, limit, diagnostics, safex's stderr):
  // printed with a failing cell.
  std::string Evidence() const;
};

// The expectations of one case on one backend.
class Check {
 public:
  // Records a failure `what` unless ok. Returns ok.
  bool Expect(bool ok, const std::string& what);
  // A deviation from the catalogue's wording that is still contained: reported, not a failure.
  void Note(const std::string& what) { notes_.push_back(what); }
  // The observed result shown in the table.
  void Summary(const std::string& s) { summary_ = s; }

  bool ok() const { return failures_.empty(); }
  const std::vector<std::string>& failures() const { return failures_; }
  const std::vector<std::string>& notes() const { return notes_; }
  const std::string& summary() const { return summary_; }

 private:
  std::vector<std::string> failures_;
  std::vector<std::string> notes_;
  std::string summary_;
};

class Suite;

// A case on one backend: where its host-side files live and what the plan step wants the check
// step to know.
struct CaseEnv {
  Suite* suite = nullptr;
  std::string backend;
  std::string dir;  // host directory of this case on this backend (canaries, input, output)
  std::map<std::string, std::string> vars;
  bool submit = false;  // through `safex submit` to the suite's `safex serve`
  bool session = false;  // ... as a session's second command (Column::session)
  std::string platform;  // gVisor's platform in the wrapper policy (Column::platform)
};

struct Case {
  std::string id;
  std::string attack;
  std::string expected;
  int weight = 1;  // rough seconds; the longest cases start first
  // Why the case cannot run yet here ("" when it can).
  std::function<std::string(CaseEnv&)> not_runnable;
  std::function<std::vector<Invocation>(CaseEnv&)> plan;
  std::function<void(CaseEnv&, const std::vector<RunRecord>&, Check&)> check;
};

// The catalogue, in its order (cases.cc).
std::vector<Case> Catalogue();

enum class CellState {
  kContained,
  kNotContained,
  kRefusedAtPlan,
  kBackendNotAvailable,
  kNotYetRunnable,
  kNotThroughSubmit,  // the submit column: a run the service cannot take (the cell says why)
};
const char* CellStateName(CellState s);

struct Cell {
  CellState state = CellState::kNotYetRunnable;
  std::string text;
  std::vector<std::string> failures;
  std::vector<std::string> notes;
  std::vector<RunRecord> runs;
  double seconds = 0;
};

struct BackendStatus {
  bool available = false;
  std::string reason;  // why not
  // Native only: the plain untrusted example on it, which must be refused at plan time.
  std::string untrusted_refusal;  // the refusal's diagnostics ("" if it was not refused)
};

struct SuiteOptions {
  std::string safex;                    // the built binary
  std::string source_dir;               // for policies/examples
  std::string probes_dir;               // the built probes; bound read-only at /probes as they are
  int jobs = 4;                         // runs at once
  std::vector<std::string> only_cases;  // empty: all
  std::vector<std::string> only_columns;  // empty: all (column names, e.g. "native (as trusted)")
};

// Host-side state of one file, for "unchanged" checks.
struct FileState {
  bool exists = false;
  std::string sha256;
  static FileState Of(const std::string& path);
  bool operator==(const FileState&) const = default;
};

class Suite {
 public:
  explicit Suite(SuiteOptions options);
  ~Suite();

  // Prepares everything; false with error() on failure.
  bool SetUp();
  void DiscoverBackends();
  void RunAll();
  void CheckHost();
  std::string Report() const;

  const std::string& error() const { return error_; }
  const std::map<std::string, BackendStatus>& backends() const { return backends_; }
  // The plain untrusted example moved to native, run once: its refusal's first diagnostic line,
  // or "" when it was not refused at plan time.
  std::string UntrustedOnNative();
  // cells()[case id][backend]
  const std::map<std::string, std::map<std::string, Cell>>& cells() const { return cells_; }
  const std::vector<std::string>& host_failures() const { return host_failures_; }
  const std::vector<Case>& cases() const { return cases_; }
  double seconds() const { return seconds_; }

  // ---- For the cases.
  const std::string& safex() const { return o_.safex; }
  const std::string& work() const { return work_; }
  const std::string& host_probes() const { return probes_; }  // bound at /probes
  const std::string& audit_db() const { return audit_db_; }
  const std::string& state_root() const { return state_root_; }
  const std::string& serve_state() const { return serve_state_; }
  const std::string& marker() const { return marker_; }
  const std::string& secret_file() const { return secret_file_; }
  std::string Endpoint(const std::string& name) const;  // listeners by name (see SetUp)
  // The egress a run may be granted (policy statements for Invocation::policy_extra): one test
  // host:port in the suite's own outside world, reached through its uplink namespace.
  static std::string GrantEgressStatements();
  // The per-run address pool of the suite's host config, and the sandbox-side address of each
  // slot (for N5: where another run could be listening).
  std::vector<std::string> PoolSandboxAddresses() const;
  const std::string& host_config() const { return host_config_; }
  int Hits(const std::string& spec) const { return listeners_->Hits(spec); }
  int sigusr1_count() const;
  pid_t runner_pid() const { return getpid(); }
  // The `safex serve` process runs of the submit column go through (-1 when none).
  pid_t serve_pid() const { return serve_ ? serve_->pid() : -1; }
  // Whether `safex run` grants egress on this build: "" when it does, else why not.
  std::string EgressUnavailable();
  // The environment variable names a wrapper policy's plan sets (from `safex compile`).
  std::vector<std::string> PolicyEnvNames(const std::string& example, const std::string& backend);
  // The wrapper policy for (example, backend, extra statements); written once.
  std::string OpenPersistedSession(const std::string& policy, RunRecord* r);
  std::string WrapperPolicy(const std::string& example, const std::string& backend,
                            const std::string& extra);

 private:
  RunRecord Execute(const Invocation& inv, CaseEnv& env);
  void RunCase(const Case& c, const Column& column);
  // `safex serve` for the submit column: started in SetUp, stopped (drained) in CheckHost.
  std::string StartServe();
  void StopServe();
  void KeepAuditLog() const;  // SAFEX_CONTAINMENT_KEEP_AUDIT (suite.cc)
  void CommonChecks(const RunRecord& r, const std::string& backend, Check& check) const;
  // Whether a machine-wide leak line names only other processes' runs (other tests on a shared
  // machine), so that it can be told apart from the suite's own.
  bool OthersOnly(const std::string& leak_line) const;

  SuiteOptions o_;
  std::string error_;
  std::string work_, probes_, state_root_, audit_db_, audit_key_, marker_, secret_file_;
  std::string policy_dir_;
  int leaked_file_fd_ = -1, leaked_dir_fd_ = -1;
  std::unique_ptr<HostListeners> listeners_;
  std::map<std::string, std::string> endpoints_;
  std::unique_ptr<testing::net::World> world_;  // the suite's "outside world" and uplink
  std::string host_config_;                     // --host-config of every run
  // The suite's `safex serve` (the submit column): its directory, socket, policy directory
  // (the wrapper policies and the examples they extend), state directory and why it is not
  // there ("" when it is).
  std::optional<Subprocess> serve_;
  std::string serve_dir_, serve_socket_, serve_policies_, serve_state_, serve_error_;
  std::set<std::string> pooled_policies_;  // names the suite's service keeps a warm pool for
  // A value of the service's GET /metrics (-1 when absent).
  int64_t ServeMetric(const std::string& name) const;
  // Runs of pooled policies handed a sandbox or not (hits + misses) so far.
  int64_t PoolTakes() const;
  // The pooled-submit gate: waits until no other pooled submit is between its admission and its
  // take, then (bounded) until `policy` has a sandbox ready; returns PoolTakes() then.
  // ReleasePooled opens the gate again.
  int64_t AdmitPooled(const std::string& policy);
  void ReleasePooled();
  std::mutex pool_gate_mu_;
  std::condition_variable pool_gate_cv_;
  bool pool_gate_busy_ = false;  // guarded by pool_gate_mu_
  int serve_exit_ = -1;
  uint64_t serve_peak_rss_kib_ = 0;
  std::vector<Case> cases_;
  std::map<std::string, BackendStatus> backends_;
  std::map<std::string, std::map<std::string, Cell>> cells_;
  mutable std::mutex mu_;  // cells_, policies_, egress_
  std::map<std::string, std::string> policies_;
  std::set<std::string> run_ids_;      // every run of this suite (cases, discovery, detection)
  std::vector<RunRecord> extra_runs_;  // runs outside the cells (discovery, egress detection)
  std::optional<std::string> egress_;
  std::map<std::string, std::vector<std::string>> env_names_;
  // Host baseline.
  std::map<std::string, FileState> host_files_;
  std::map<std::string, std::string> host_settings_;
  std::map<std::string, uint64_t> free_bytes_;
  std::map<std::string, uint64_t> free_inodes_;
  uint64_t image_cache_bytes_ = 0;
  std::set<std::string> leak_baseline_;
  std::vector<std::string> host_failures_;
  std::vector<std::string> host_notes_;
  double seconds_ = 0;
  std::string started_at_;
};

}  // namespace safex::containment
