// Crash recovery, run by `safex serve` at start while it holds the instance lock and before it
// accepts any work:
//   1. every backend's leftovers of dead owners (drivers/backends.h, Driver::CleanupStale):
//      sandboxes, VMMs, their cgroups, mounts and run directories; runs whose owner lock is held
//      by a live `safex run` are left alone; a backend that cannot work here (no runsc) is a
//      warning, since no run of it can have left anything;
//   2. run networks of dead owners: namespaces, veths, nftables tables, address leases
//      (drivers::net::CleanupStale; live ones are left alone);
//   3. run records whose lock is free (supervisor/sweep.h, the sweep every `safex run` does too):
//      each such run's sandbox by run id, its staged input, one `interrupted` event when the log
//      shows it started and never ended, then the record;
//   4. the daemon's own request directories (<state dir>/private/requests/*): only a previous
//      daemon instance makes them, and it is gone (the caller holds the instance lock).
// Runs that are unfinished in the log but have no record (no owner is known) are left as they are.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "common/status.h"
#include "drivers/backends.h"
#include "drivers/net/network_config.h"

namespace safex::serve {

struct RecoveryOptions {
  std::string state_dir;             // the runs' sandbox state root (the service's state_dir)
  drivers::BackendsConfig backends;  // as the service runs them (for the sweep of step 3)
  drivers::net::NetworkConfig network;
  std::string records_dir;  // supervisor::RecordsDirFor(audit_db)
  std::string audit_db;
};

struct RecoveryReport {
  std::map<std::string, int> sandboxes_removed;  // by backend name
  int networks_removed = 0;
  int records_removed = 0;
  int input_dirs_removed = 0;
  std::vector<std::string> interrupted;  // run ids closed with an interrupted event
  // Pooled sandboxes of a killed service: removed with the stale sandboxes above, and their end
  // recorded (an eviction) so that every sandbox made has one.
  std::vector<std::string> sandboxes_evicted;
  // Sessions a killed service left open: their sandboxes removed with the others, their end
  // recorded ("interrupted: ...").
  std::vector<std::string> sessions_closed;
  std::vector<std::string> warnings;     // things skipped (e.g. runsc missing: nothing to clean)
  // "S gvisor, M microvm" for the log line.
  std::string SandboxesText() const;
};

// Errors: something a previous instance left could not be removed or recorded; the daemon must
// not start over it.
// `backends` are the service's own (its state_dir), the same the runs will use.
Result<RecoveryReport> Recover(const RecoveryOptions& options, drivers::Backends& backends,
                               audit::AuditLog& log);

// Whether process `pid`, which made something at `made_ns` (CLOCK_REALTIME), is gone: no such
// process, or one that started after that moment (a reused pid, a reboot). Recovery records the
// end of a pooled sandbox only when its maker is gone: a live one is another service sharing the
// audit log.
bool MakerGone(std::optional<int32_t> pid, int64_t made_ns);

// The directory under `state_dir` where the daemon writes request input files, one per run.
std::string ServeInputsDir(const std::string& state_dir);
// The directory under `state_dir` where the daemon keeps runs' output files for the runs API
// (docs/api.md), one directory per run, removed after results_ttl.
std::string ServeResultsDir(const std::string& state_dir);

}  // namespace safex::serve
