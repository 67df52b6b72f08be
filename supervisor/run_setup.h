// What `safex run` and `safex test` set up before any run, in this order: the audit log (open,
// writable, verified: nothing runs without a record), then the host config, the sweep of runs
// whose owner died, the delegated cgroup's limits, the backends and the Runner.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "common/status.h"
#include "compiler/host_config.h"
#include "drivers/backends.h"
#include "supervisor/runner.h"

namespace safex::supervisor {

struct RunSetupFlags {
  std::string host_config = compiler::kDefaultHostConfigPath;
  std::string audit_db = audit::kDefaultDbPath;
  std::string audit_key = audit::kDefaultKeyPath;
  std::string state_root = "/run/safex";
  std::string runsc;  // "" : the host config's backends { gvisor { runsc } }
  // The cgroup the run's own goes below ("" : the host config's delegated `cgroups { parent }`).
  // safex-oci sets the container's cgroupsPath, inside the pod's cgroup that kubelet accounts;
  // the host's `cgroups { }` caps are then not written there (that cgroup is the pod's).
  std::string cgroup_parent;
  // Sandboxes made ahead of their run (RunnerOptions::sandboxes); nullptr: none.
  SandboxSource* sandboxes = nullptr;
};

struct RunSetup {
  std::unique_ptr<audit::AuditLog> log;
  compiler::HostConfig host;
  std::unique_ptr<drivers::Backends> backends;
  std::unique_ptr<Runner> runner;
};

// The audit log, fail closed: opened for writing, writable now, and verified (incremental, full
// when the last full check is a day old). The error is the refusal reason; nothing can be
// recorded when it fails.
Result<std::unique_ptr<audit::AuditLog>> OpenAuditLogForRuns(const RunSetupFlags& flags);

// Everything after the log (setup->log must be open). Problems cleaning up dead runs are
// warnings (written to stderr: they stay for the next sweep); any other failure is the reason
// to refuse, which the caller records in the log.
Status PrepareRunSetup(const RunSetupFlags& flags, RunSetup* setup);

}  // namespace safex::supervisor
