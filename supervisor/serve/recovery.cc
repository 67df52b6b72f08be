#include "supervisor/serve/recovery.h"

#include <dirent.h>
#include <sys/stat.h>

#include <filesystem>

#include "drivers/gvisor/gvisor_driver.h"
#include "drivers/microvm/microvm_driver.h"
#include "drivers/net/run_network.h"
#include "supervisor/private_dir.h"
#include "supervisor/sweep.h"

namespace safex::serve {
namespace {

// Removes `path` if it exists. Only paths built here from a state root are given.
Status RemoveIfPresent(const std::string& path, int* removed) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return Status::Internal("removing " + path + ": " + ec.message());
  if (removed != nullptr) ++*removed;
  return Status::Ok();
}

}  // namespace

std::string ServeInputsDir(const std::string& state_dir) {
  return supervisor::PrivateRootFor(state_dir) + "/requests";
}

Result<RecoveryReport> Recover(const RecoveryOptions& options, audit::AuditLog& log) {
  RecoveryReport report;
  std::string errors;
  auto note = [&errors](const std::string& what, const Status& st) {
    if (st.ok()) return;
    errors += (errors.empty() ? "" : "; ") + what + ": " + st.message();
  };

  // 1. Sandboxes.
  if (options.gvisor_allowed) {
    drivers::GvisorOptions g;
    g.runsc_path = options.runsc_path;
    g.state_root = options.state_dir;
    g.cgroup_parent = options.cgroup_parent;
    drivers::GvisorDriver gvisor(g);
    if (Status probe = gvisor.Probe(); !probe.ok()) {
      // No working runsc: no gVisor sandbox can exist or be started (runs are refused).
      report.warnings.push_back("gVisor leftovers not checked: " + probe.message());
    } else {
      note("sandboxes", gvisor.CleanupStale(&report.sandboxes_removed));
    }
  }

  drivers::MicrovmOptions m;
  m.state_root = options.microvm_state_root;
  m.cgroup_parent = options.cgroup_parent;
  drivers::MicrovmDriver microvm(m);  // never probed: cleanup needs no QEMU
  if (options.microvm_allowed) {
    note("microVM runs", microvm.CleanupStale(&report.microvm_runs_removed));
  }

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
  so.runsc_path = options.runsc_path;
  so.cgroup_parent = options.cgroup_parent;
  so.gvisor = options.gvisor_allowed;
  so.microvm = options.microvm_allowed;
  so.microvm_state_root = options.microvm_state_root;
  so.network = options.network;
  so.request_inputs_dir = ServeInputsDir(options.state_dir);
  supervisor::SweepReport swept;
  note("dead runs", supervisor::SweepDeadRuns(so, log, &swept));
  report.records_removed += swept.records_removed;
  report.sandboxes_removed += swept.sandboxes_removed;
  report.microvm_runs_removed += swept.microvm_runs_removed;
  report.networks_removed += swept.networks_removed;
  report.input_dirs_removed += swept.input_dirs_removed;
  report.interrupted = swept.interrupted;
  for (std::string& w : swept.warnings) report.warnings.push_back(std::move(w));

  // 4. This daemon's input directories (any left belong to a dead instance), and the directory
  //    versions before <state dir>/private kept them in.
  note("legacy input dir",
       RemoveIfPresent(options.state_dir + "/serve.inputs", &report.input_dirs_removed));
  const std::string inputs = ServeInputsDir(options.state_dir);
  if (DIR* d = opendir(inputs.c_str()); d != nullptr) {
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
    for (const std::string& n : names) {
      note("input dir", RemoveIfPresent(inputs + "/" + n, &report.input_dirs_removed));
    }
  }

  if (!errors.empty()) return Status::Internal("recovery: " + errors);
  return report;
}

}  // namespace safex::serve
