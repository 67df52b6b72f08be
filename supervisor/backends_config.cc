#include "supervisor/backends_config.h"

#include "supervisor/network.h"

namespace safex::supervisor {

drivers::BackendsConfig BackendsConfigFrom(const compiler::HostConfig& host,
                                           const std::string& state_root) {
  drivers::BackendsConfig c;
  c.settings = host.backends;
  c.offered = host.ceilings.allowed_backends;
  c.cgroups = host.cgroups;
  c.state_root = state_root;
  c.network_provider = MakeNetworkProvider(NetworkConfigFrom(host.network), host.ceilings);
  return c;
}

}  // namespace safex::supervisor
