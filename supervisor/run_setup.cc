#include "supervisor/run_setup.h"

#include <unistd.h>

#include <cstdio>

#include "supervisor/backends_config.h"
#include "supervisor/network.h"
#include "supervisor/run_record.h"
#include "supervisor/sweep.h"

namespace safex::supervisor {

Result<std::unique_ptr<audit::AuditLog>> OpenAuditLogForRuns(const RunSetupFlags& f) {
  audit::AuditOptions options;
  options.key_path = f.audit_key;
  auto log = audit::AuditLog::Open(f.audit_db, options);
  if (!log.ok()) return Status::Unavailable("audit log unavailable: " + log.status().message());
  if (Status st = (*log)->CheckWritable(); !st.ok()) {
    return Status::Unavailable("audit log not writable: " + st.message());
  }
  // A damaged log refuses runs (fail closed). The check is incremental (the events since the
  // last check) and becomes a full one when the last full check is a day old (docs/audit.md).
  auto integrity = (*log)->CheckIntegrity(audit::IntegrityCheck::kIncremental);
  if (!integrity.ok() || !integrity->ok) {
    return Status::DataLoss("audit log " + f.audit_db + " does not verify (" +
                            (integrity.ok() ? integrity->problem : integrity.status().message()) +
                            "); no run starts until it does: see `safex audit verify`");
  }
  return std::move(*log);
}

Status PrepareRunSetup(const RunSetupFlags& f, RunSetup* setup) {
  auto host = compiler::LoadHostConfigFile(f.host_config);
  if (!host.ok()) return Status::InvalidArgument("host config: " + host.status().message());
  setup->host = std::move(*host);
  if (!f.runsc.empty()) setup->host.backends.gvisor.runsc = f.runsc;
  const drivers::BackendsConfig backends_config = BackendsConfigFrom(setup->host, f.state_root);

  // Runs of owners that died (a SIGKILLed `safex run`, a crash) are closed before this one
  // starts: their sandboxes removed, their audit rows ended as interrupted (sweep.h). What
  // cannot be cleaned is said, and stays for the next sweep; the runs go ahead (they share
  // nothing with them).
  SweepOptions sweep;
  sweep.records_dir = RecordsDirFor(f.audit_db);
  sweep.audit_db = f.audit_db;
  sweep.backends = backends_config;
  sweep.network = NetworkConfigFrom(setup->host.network);
  SweepReport swept;
  if (Status st = SweepDeadRuns(sweep, *setup->log, &swept); !st.ok()) {
    std::fprintf(stderr, "safex: warning: %s\n", st.message().c_str());
  }

  drivers::BackendsConfig run_backends = backends_config;
  if (f.cgroup_parent.empty()) {
    SAFEX_RETURN_IF_ERROR(drivers::Backends::ApplyCgroupLimits(setup->host.cgroups));
  } else {
    run_backends.cgroups.parent = f.cgroup_parent;
  }
  setup->backends = drivers::Backends::Create(run_backends);
  RunnerOptions options;
  options.state_root = f.state_root;
  options.backends = setup->backends.get();
  options.records_dir = RecordsDirFor(f.audit_db);
  options.audit_db = f.audit_db;
  options.sandboxes = f.sandboxes;
  setup->runner = std::make_unique<Runner>(std::move(options));
  return Status::Ok();
}

}  // namespace safex::supervisor
