// Closing the runs of owners that died (a SIGKILLed `safex run`, a crashed daemon), from their
// durable run records (run_record.h). Shared by `safex run`, which sweeps at every start for its
// audit log, and by `safex serve`'s crash recovery (serve/recovery.h).
//
// For each record in <records_dir> whose lock can be taken (its owner is gone), in this order:
//   1. the sandbox it may have left, by run id, under the state root the record names: every
//      backend's Driver::CleanupStaleRun (drivers/backends.h: processes, cgroups, mounts, state);
//   2. the run networks of dead owners (drivers::net::CleanupStale; only when there is a stale
//      record, since it scans every address slot);
//   3. the input snapshot and request files named by the run id (supervisor/private_dir.h);
//   4. one `interrupted` event when the log shows the run started and never ended;
//   5. the record itself (last: a failure above leaves it for the next sweep).
// Records of live owners are left alone (their lock is held), so concurrent sweeps by several
// `safex run` processes and the daemon are safe: each stale record is handled by whoever takes
// its lock first. Cheap when nothing is stale: one directory listing.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "common/status.h"
#include "drivers/backends.h"
#include "drivers/net/network_config.h"

namespace safex::supervisor {

struct SweepOptions {
  std::string records_dir;  // RecordsDirFor(audit_db); "" : nothing to sweep
  std::string audit_db;     // records naming another log in the same directory are skipped
  // The host's backends as configured; each record's own state root replaces state_root.
  drivers::BackendsConfig backends;
  drivers::net::NetworkConfig network;
  // A directory of per-run request files that only the daemon makes (serve's request inputs);
  // "" : none.
  std::string request_inputs_dir;
};

struct SweepReport {
  int records_removed = 0;
  std::map<std::string, int> sandboxes_removed;  // by backend name
  int networks_removed = 0;
  int input_dirs_removed = 0;
  std::vector<std::string> interrupted;  // run ids closed with an interrupted event
  std::vector<std::string> warnings;     // what could not be checked, and why
};

// Errors: something a dead owner left could not be removed or recorded (the record stays for the
// next sweep). The report holds what was done either way. Before the records: once per boot,
// the runs of earlier boots that have no record (CloseRunsFromEarlierBoots).
Status SweepDeadRuns(const SweepOptions& options, audit::AuditLog& log, SweepReport* report);

// Records are not synced (run_record.h), so a machine crash can leave a started run without
// one. Once per boot (the boot id kept in <records_dir>/.boot-swept-<log file name>): every
// unfinished run of the log that started before this boot and has no record is closed as
// interrupted. Runs of this boot are never touched (their owners may be alive).
Status CloseRunsFromEarlierBoots(const SweepOptions& options, audit::AuditLog& log,
                                 SweepReport* report);

}  // namespace safex::supervisor
