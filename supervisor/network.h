// Per-run networks for plans that grant egress: the supervisor resolves the plan's hosts (refusing
// forbidden answers), builds a drivers::net::RunNetwork and hands it to the driver through
// drivers::NetworkProvider. Plans without egress never get here (no network at all).
#pragma once

#include "compiler/host_config.h"
#include "drivers/net/network_config.h"
#include "drivers/net/network_provider.h"
#include "drivers/net/resolve.h"
#include "plan/ceilings.h"

namespace safex::supervisor {

// The operator's network settings as the network module takes them. The address leases live in
// settings.lease_dir, the same for every safex process on the host (never below an instance's
// state root: two instances with their own leases handed out the same address).
drivers::net::NetworkConfig NetworkConfigFrom(const compiler::NetworkSettings& settings);

// A provider that resolves with `resolver` (the system's by default) when each run starts.
drivers::net::NetworkProvider MakeNetworkProvider(
    drivers::net::NetworkConfig config, plan::Ceilings ceilings,
    drivers::net::Resolver resolver = drivers::net::SystemResolver());

}  // namespace safex::supervisor
