#include "supervisor/serve/recovery.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/time_format.h"
#include "common/fs_tree.h"
#include "common/proc_stat.h"
#include "drivers/net/run_network.h"
#include "supervisor/private_dir.h"
#include "supervisor/sweep.h"

namespace safex::serve {
namespace {

// Removes `path` if it exists. Only paths built here from a state root are given.
Status RemoveIfPresent(const std::string& path, int* removed) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();
  SAFEX_RETURN_IF_ERROR(RemoveTree(path));
  if (removed != nullptr) ++*removed;
  return Status::Ok();
}

// 1b. Every pooled sandbox made and never ended whose maker is gone gets its eviction event.
Status RecordLostSandboxes(audit::AuditLog& log, std::vector<std::string>* evicted) {
  SAFEX_ASSIGN_OR_RETURN(auto unended, log.UnendedSandboxes());
  for (const audit::AuditLog::UnendedSandbox& u : unended) {
    if (!MakerGone(u.maker_pid, u.made_ns)) continue;
    audit::SandboxEvent ev;
    ev.sandbox_id = u.sandbox_id;
    ev.what = audit::SandboxEvent::What::kEvicted;
    ev.requester.pid = getpid();
    ev.policy_name = u.policy_name;
    ev.plan_digest = u.plan_digest;
    ev.reason =
        "its service ended without destroying it (killed or crashed); removed by the next "
        "start's recovery";
    ev.time_ns = audit::NowNs();
    SAFEX_RETURN_IF_ERROR(log.RecordSandbox(ev).With("sandbox " + u.sandbox_id));
    evicted->push_back(u.sandbox_id);
  }
  return Status::Ok();
}

// 1c. Every session opened and never closed gets its end: only one service uses a state
// directory at a time (its instance lock), and the sandboxes below it were all just removed.
// (A second service writing the same audit log from another state directory would see its live
// sessions closed here: docs/operating.md says not to share a log between services.)
Status RecordLostSessions(audit::AuditLog& log, std::vector<std::string>* closed) {
  SAFEX_ASSIGN_OR_RETURN(auto open, log.OpenSessions());
  for (const audit::AuditLog::OpenSession& o : open) {
    audit::SessionEvent ev;
    ev.session_id = o.session_id;
    ev.what = audit::SessionEvent::What::kClosed;
    ev.requester.pid = getpid();
    ev.reason =
        "interrupted: its service ended without closing it (killed or crashed); closed by the "
        "next start's recovery";
    ev.time_ns = audit::NowNs();
    SAFEX_RETURN_IF_ERROR(log.RecordSession(ev).With("session " + o.session_id));
    closed->push_back(o.session_id);
  }
  return Status::Ok();
}

}  // namespace

bool MakerGone(std::optional<int32_t> pid, int64_t made_ns) {
  if (!pid || *pid <= 0) return true;
  const std::optional<ProcStat> stat = ReadProcStat(*pid);
  if (!stat) return true;  // no such process
  const std::optional<int64_t> boot = BootTimeSeconds();
  if (!boot) return false;  // unreadable: assume alive, leave it alone
  // A process with this pid started after the record was made is another one (btime has whole
  // seconds, hence the second of slack).
  const int64_t start_ns = *boot * 1'000'000'000 + TicksToNs(stat->start_ticks);
  return start_ns > made_ns + 1'000'000'000;
}

std::string ServeInputsDir(const std::string& state_dir) {
  return supervisor::PrivateRootFor(state_dir) + "/requests";
}

std::string ServeResultsDir(const std::string& state_dir) {
  return supervisor::PrivateRootFor(state_dir) + "/results";
}

std::string RecoveryReport::SandboxesText() const {
  std::string text;
  for (const auto& [backend, n] : sandboxes_removed) {
    text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + backend;
  }
  return text.empty() ? "0" : text;
}

Result<RecoveryReport> Recover(const RecoveryOptions& options, drivers::Backends& backends,
                               audit::AuditLog& log) {
  RecoveryReport report;
  std::string errors;
  auto note = [&errors](const std::string& what, const Status& st) {
    if (st.ok()) return;
    errors += (errors.empty() ? "" : "; ") + what + ": " + st.message();
  };

  // 1. Sandboxes of every backend.
  drivers::Backends::Cleanup cleanup;
  note("sandboxes", backends.CleanupStale(&cleanup));
  report.sandboxes_removed = cleanup.removed;
  for (std::string& w : cleanup.warnings) report.warnings.push_back(std::move(w));

  // 1b. The audit trail of the pooled sandboxes removed in 1 (those of a service that was
  //     killed): each gets the end its service never wrote.
  note("pooled sandboxes", RecordLostSandboxes(log, &report.sandboxes_evicted));

  // 2. Networks.
  if (Status v = drivers::net::ValidateNetworkConfig(options.network); v.ok()) {
    note("networks", drivers::net::CleanupStale(options.network, &report.networks_removed));
  } else {
    report.warnings.push_back("run networks not checked: " + v.message());
  }

  // 3. Runs whose owner died (supervisor/sweep.h, the same sweep every `safex run` does).
  supervisor::SweepOptions so;
  so.records_dir = options.records_dir;
  so.audit_db = options.audit_db;
  so.backends = options.backends;
  so.network = options.network;
  so.request_inputs_dir = ServeInputsDir(options.state_dir);
  supervisor::SweepReport swept;
  note("dead runs", supervisor::SweepDeadRuns(so, log, &swept));
  report.records_removed += swept.records_removed;
  for (const auto& [backend, n] : swept.sandboxes_removed) report.sandboxes_removed[backend] += n;
  report.networks_removed += swept.networks_removed;
  report.input_dirs_removed += swept.input_dirs_removed;
  report.interrupted = swept.interrupted;
  for (std::string& w : swept.warnings) report.warnings.push_back(std::move(w));

  // 3b. Sessions of a killed service (their sandboxes went in 1, their last commands in 3): each
  //     gets the end its service never wrote.
  note("sessions", RecordLostSessions(log, &report.sessions_closed));

  // 4. This daemon's input directories (any left belong to a dead instance), and the directory
  //    versions before <state dir>/private kept them in.
  note("legacy input dir",
       RemoveIfPresent(options.state_dir + "/serve.inputs", &report.input_dirs_removed));
  // Request input files and the output files kept for the runs API: a previous instance's runs
  // are over (their results are in the audit log), so what it kept for them goes.
  for (const std::string& dir :
       {ServeInputsDir(options.state_dir), ServeResultsDir(options.state_dir)}) {
    for (const std::string& n : ListDirectoryOrEmpty(dir)) {
      note("kept run files", RemoveIfPresent(dir + "/" + n, &report.input_dirs_removed));
    }
  }

  if (!errors.empty()) return Status::Internal("recovery: " + errors);
  return report;
}

}  // namespace safex::serve
