// Crash recovery, run by `safex serve` at start while it holds the instance lock and before it
// accepts any work:
//   1. sandboxes of dead owners under the state dir: runsc containers, their cgroups (and any
//      process still in them), output mounts and run directories (GvisorDriver::CleanupStale;
//      a run whose owner lock is held by a live `safex run` is left alone);
//      and microVM runs of dead owners: the VMM (QEMU, whatever is left in its cgroup), its
//      cgroups and the run directories under the microVM state root (MicrovmDriver::CleanupStale;
//      a run whose owner.lock is held by a live supervisor is left alone);
//   2. run networks of dead owners: namespaces, veths, nftables tables, address slots
//      (drivers::net::CleanupStale; live ones are left alone);
//   3. run records (supervisor/run_record.h) whose lock is free: the run's owner died. Each such
//      run that the audit log shows started and never ended gets one `interrupted` event; the
//      input directories named by the record and its microVM leftovers
//      (MicrovmDriver::CleanupStaleRun) are removed, then the record;
//   4. the daemon's own per-run input directories (<state dir>/serve.inputs/*): only a previous
//      daemon instance makes them, and it is gone (the caller holds the instance lock).
// Runs that are unfinished in the log but have no record (no owner is known) are left as they are.
#pragma once

#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "common/status.h"
#include "drivers/net/network_config.h"

namespace safex::serve {

struct RecoveryOptions {
  std::string state_dir;    // the runs' sandbox state root
  std::string runsc_path = "/usr/local/bin/runsc";
  std::string cgroup_parent = "safex";
  bool gvisor_allowed = true;  // clean gVisor leftovers (needs a working runsc)
  // microVM leftovers (needs neither QEMU nor the guest: only cgroups, when anything is left).
  // The state root is MicrovmOptions' default, the one supervisor::Runner uses.
  bool microvm_allowed = true;
  std::string microvm_state_root = "/var/lib/safex/microvm";
  drivers::net::NetworkConfig network;
  std::string records_dir;  // supervisor::RecordsDirFor(audit_db)
  std::string audit_db;
};

struct RecoveryReport {
  int sandboxes_removed = 0;
  int microvm_runs_removed = 0;
  int networks_removed = 0;
  int records_removed = 0;
  int input_dirs_removed = 0;
  std::vector<std::string> interrupted;  // run ids closed with an interrupted event
  std::vector<std::string> warnings;     // things skipped (e.g. runsc missing: nothing to clean)
};

// Errors: something a previous instance left could not be removed or recorded; the daemon must
// not start over it.
Result<RecoveryReport> Recover(const RecoveryOptions& options, audit::AuditLog& log);

// The directory under `state_dir` where the daemon writes request input files, one per run.
std::string ServeInputsDir(const std::string& state_dir);

}  // namespace safex::serve
