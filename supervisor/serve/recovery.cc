#include "supervisor/serve/recovery.h"

#include <dirent.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "drivers/gvisor/gvisor_driver.h"
#include "drivers/microvm/microvm_driver.h"
#include "drivers/net/run_network.h"
#include "supervisor/run_record.h"

namespace safex::serve {
namespace {

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Removes `path` if it exists. Only paths built here from a state root and a run id are given.
Status RemoveIfPresent(const std::string& path, int* removed) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return Status::Internal("removing " + path + ": " + ec.message());
  if (removed != nullptr) ++*removed;
  return Status::Ok();
}

bool IsAbsoluteClean(const std::string& p) {
  return !p.empty() && p[0] == '/' && p.find("/../") == std::string::npos &&
         !p.ends_with("/..") && p.find('\0') == std::string::npos;
}

}  // namespace

std::string ServeInputsDir(const std::string& state_dir) { return state_dir + "/serve.inputs"; }

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

  // 3. Runs whose owner died.
  if (!options.records_dir.empty()) {
    auto stale = supervisor::TakeStaleRecords(options.records_dir);
    if (!stale.ok()) {
      note("run records", stale.status());
    } else if (!stale->empty()) {
      std::set<std::string> unfinished;
      auto runs = log.UnfinishedRuns();
      if (!runs.ok()) return runs.status().With("recovery: reading unfinished runs");
      unfinished.insert(runs->begin(), runs->end());
      const std::string our_db = Basename(options.audit_db);
      for (supervisor::StaleRecord& r : *stale) {
        const supervisor::RunRecordInfo& info = r.info;
        if (r.readable && !info.audit_db.empty() && Basename(info.audit_db) != our_db) {
          continue;  // another log in the same directory: its own writers recover it
        }
        // Leftovers named by the run id only, under the root the record names.
        if (r.readable && IsAbsoluteClean(info.state_root)) {
          note("input snapshot",
               RemoveIfPresent(info.state_root + "/input-" + info.run_id,
                               &report.input_dirs_removed));
          note("request input",
               RemoveIfPresent(ServeInputsDir(info.state_root) + "/" + info.run_id,
                               &report.input_dirs_removed));
        }
        if (options.microvm_allowed) {
          // Its owner is dead (the record's lock was free): whatever its microVM left goes, even a
          // run directory without a lock file.
          bool removed = false;
          Status st = microvm.CleanupStaleRun(info.run_id, &removed);
          note("microVM run " + info.run_id, st);
          if (removed) ++report.microvm_runs_removed;
        }
        if (unfinished.count(info.run_id) > 0) {
          audit::Interrupted ev;
          ev.run_id = info.run_id;
          ev.reason = "the process that owned this run" +
                      (r.readable && info.pid > 0 ? " (pid " + std::to_string(info.pid) + ")"
                                                  : std::string()) +
                      " ended before the run did; its sandbox was removed by safex serve at start";
          Status st = log.RecordInterrupted(ev);
          if (!st.ok()) {
            note("interrupted event for " + info.run_id, st);
            continue;  // the record stays: the next start tries again
          }
          report.interrupted.push_back(info.run_id);
        }
        note("run record", supervisor::RemoveStaleRecord(r));
        ++report.records_removed;
      }
    }
  }

  // 4. This daemon's input directories (any left belong to a dead instance).
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
