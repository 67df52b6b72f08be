// Backends: every isolation backend of this host, built once from the host config. The one place
// that names the concrete drivers (gvisor/, microvm/, native/): the supervisor asks it for the
// driver a plan names, and never falls back to another; crash recovery asks every driver to
// remove what runs of dead owners left. A new backend is one folder and one entry in Create().
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "drivers/driver.h"
#include "drivers/net/network_provider.h"
#include "plan/backend_settings.h"
#include "plan/plan.h"

namespace safex::drivers {

struct BackendsConfig {
  plan::BackendSettings settings;         // the host config's `backends { }`
  std::set<plan::Backend> offered;        // the host's ceilings.allowed_backends
  plan::CgroupSettings cgroups;           // the delegated cgroup every run's cgroup goes below
  std::string state_root = "/run/safex";  // gVisor's per-run state (`--state-root`, `state_dir`)
  net::NetworkProvider network_provider;  // for plans that grant egress ("": such runs refused)
};

class Backends {
 public:
  // Builds the driver of every offered backend (cheap: nothing is probed until a run needs it).
  static std::unique_ptr<Backends> Create(const BackendsConfig& config);
  // Exactly these drivers (tests: a fake driver; the unit tests of the run lifecycle).
  explicit Backends(std::map<plan::Backend, std::unique_ptr<Driver>> drivers);
  ~Backends();

  // The driver for `backend`. Unavailable (with the reason) when the host does not offer it or
  // this build has no driver for it: a plan is refused, never run on another backend.
  Result<Driver*> Get(plan::Backend backend);

  struct Cleanup {
    std::map<std::string, int> removed;  // by backend name
    std::vector<std::string> warnings;   // backends that cannot work here (nothing to clean)
  };
  // Every driver's CleanupStale. A backend that cannot work on this host at all (Unavailable,
  // e.g. no runsc) is a warning: no run of it can have left anything. Other failures are errors.
  Status CleanupStale(Cleanup* report);
  // The delegated cgroup's own limits (`cgroups { memory pids cpus }`: every sandbox of the host
  // together), applied when any is set. An error means they could not be applied: the caller
  // refuses to run rather than run without the operator's cap.
  static Status ApplyCgroupLimits(const plan::CgroupSettings& cgroups,
                                  const std::string& cgroup_root = "/sys/fs/cgroup");

  // Every driver's CleanupStaleRun for one run whose owner is known to be dead.
  Status CleanupStaleRun(const std::string& run_id, Cleanup* report);

 private:
  std::map<plan::Backend, std::unique_ptr<Driver>> drivers_;
};

}  // namespace safex::drivers
