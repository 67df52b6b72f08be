#include "supervisor/serve/recovery.h"

#include <dirent.h>
#include <sys/stat.h>

#include "common/fs_tree.h"
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

}  // namespace

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
