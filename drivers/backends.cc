#include "drivers/backends.h"

#include <utility>

#include "drivers/cgroup/cgroup.h"
#include "drivers/gvisor/gvisor_driver.h"
#include "drivers/microvm/microvm_driver.h"
#include "drivers/native/native_driver.h"

namespace safex::drivers {

std::unique_ptr<Backends> Backends::Create(const BackendsConfig& config) {
  std::map<plan::Backend, std::unique_ptr<Driver>> drivers;
  for (plan::Backend b : config.offered) {
    switch (b) {
      case plan::Backend::kGvisor: {
        GvisorOptions g;
        g.runsc_path = config.settings.gvisor.runsc;
        g.platforms = config.settings.gvisor.platforms;
        g.state_root = config.state_root;
        g.cgroup_parent = config.cgroups.parent;
        g.network_provider = config.network_provider;
        drivers[b] = std::make_unique<GvisorDriver>(std::move(g));
        break;
      }
      case plan::Backend::kMicrovm: {
        const plan::MicrovmBackendSettings& s = config.settings.microvm;
        MicrovmOptions m;
        m.qemu_path = s.qemu;
        m.kernel_path = s.kernel;
        m.initramfs_path = s.initramfs;
        m.state_root = s.state_root;
        m.kvm = s.kvm;
        m.tcg_for_untrusted = s.tcg_for_untrusted;
        m.cgroup_parent = config.cgroups.parent;
        m.network_provider = config.network_provider;
        drivers[b] = std::make_unique<MicrovmDriver>(std::move(m));
        break;
      }
      case plan::Backend::kNative: {
        NativeOptions n;
        n.state_root = config.state_root;
        n.cgroup_parent = config.cgroups.parent;
        n.settings = config.settings.native;
        n.network_provider = config.network_provider;
        drivers[b] = std::make_unique<NativeDriver>(std::move(n));
        break;
      }
    }
  }
  return std::make_unique<Backends>(std::move(drivers));
}

Backends::Backends(std::map<plan::Backend, std::unique_ptr<Driver>> drivers)
    : drivers_(std::move(drivers)) {}
Backends::~Backends() = default;

Result<Driver*> Backends::Get(plan::Backend backend) {
  auto it = drivers_.find(backend);
  if (it == drivers_.end()) {
    // Fail closed: a backend this host or build cannot provide refuses; it never falls back.
    return Status::Unavailable(std::string("backend ") + plan::BackendName(backend) +
                               " is not available on this host (not offered by its host config, "
                               "or not in this build of safex)");
  }
  return it->second.get();
}

Status Backends::ApplyCgroupLimits(const plan::CgroupSettings& c, const std::string& root) {
  if (c.memory_bytes == 0 && c.pids == 0 && c.cpus == 0) return Status::Ok();
  SAFEX_ASSIGN_OR_RETURN(cgroup::CgroupHost host, cgroup::CgroupHost::Detect(root));
  cgroup::Limits limits;
  limits.memory_bytes = c.memory_bytes;
  limits.pids_max = c.pids;
  limits.cpus = c.cpus;
  return host.LimitParent(c.parent, limits).With("the delegated cgroup " + c.parent);
}

Status Backends::CleanupStale(Cleanup* report) {
  std::string errors;
  for (auto& [backend, driver] : drivers_) {
    int n = 0;
    Status st = driver->CleanupStale(&n);
    report->removed[driver->name()] += n;
    if (st.code() == Status::Code::kUnavailable) {
      report->warnings.push_back(std::string(driver->name()) +
                                 " leftovers not checked: " + st.message());
    } else if (!st.ok()) {
      errors += (errors.empty() ? "" : "; ") + st.message();
    }
  }
  if (!errors.empty()) return Status::Internal(errors);
  return Status::Ok();
}

Status Backends::CleanupStaleRun(const std::string& run_id, Cleanup* report) {
  std::string errors;
  for (auto& [backend, driver] : drivers_) {
    bool removed = false;
    Status st = driver->CleanupStaleRun(run_id, &removed);
    if (removed) ++report->removed[driver->name()];
    if (st.code() == Status::Code::kUnavailable) {
      report->warnings.push_back(std::string(driver->name()) + " leftovers of " + run_id +
                                 " not checked: " + st.message());
    } else if (!st.ok()) {
      errors += (errors.empty() ? "" : "; ") + st.message();
    }
  }
  if (!errors.empty()) return Status::Internal(errors);
  return Status::Ok();
}

}  // namespace safex::drivers
