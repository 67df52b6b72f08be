#include "supervisor/network.h"

#include <memory>
#include <utility>

#include "drivers/net/run_network.h"

namespace safex::supervisor {

drivers::net::NetworkConfig NetworkConfigFrom(const compiler::NetworkSettings& settings) {
  drivers::net::NetworkConfig c;
  c.pool_cidr = settings.pool;
  c.uplink_netns = settings.uplink_netns;
  c.manage_ip_forward = settings.manage_ip_forward;
  c.state_dir = settings.lease_dir;
  return c;
}

drivers::net::NetworkProvider MakeNetworkProvider(drivers::net::NetworkConfig config,
                                                  plan::Ceilings ceilings,
                                                  drivers::net::Resolver resolver) {
  return
      [config = std::move(config), ceilings = std::move(ceilings), resolver = std::move(resolver)](
          const plan::Plan& plan,
          const std::string& run_id) -> Result<std::unique_ptr<drivers::net::RunNetwork>> {
        SAFEX_RETURN_IF_ERROR(drivers::net::ValidateNetworkConfig(config));
        // Names are resolved now, when the run starts, and every answer judged; the sandbox gets
        // the answers through its own /etc/hosts and can reach no DNS server.
        auto resolved = drivers::net::ResolveEgress(plan.network.egress, ceilings, resolver);
        if (!resolved.ok()) return resolved.status().With("egress refused");
        auto net = drivers::net::RunNetwork::Create(config, run_id, *resolved);
        if (!net.ok()) return net.status().With("run network");
        return std::make_unique<drivers::net::RunNetwork>(std::move(net).value());
      };
}

}  // namespace safex::supervisor
