// The microVM's attachment to a run's network (egress only).
//
// drivers/net builds the run's network namespace with a veth whose inner end (eth0) carries the
// run's address, and nftables rules in the uplink namespace that forward only the granted flows
// from that address. A guest has its own network stack, so the address moves into the guest: in
// the run's namespace a tap device is created (its fd goes to QEMU as `-netdev tap,fd=`), eth0
// loses its address and both are joined at layer 2 by a bridge with nothing else on it. The
// guest then takes the run's address and gateway on its own eth0 (guest/net_setup.cc), and every
// frame it sends leaves through the veth into the uplink, where the run's rules apply unchanged.
//
// Nothing here needs removing: the tap and the bridge live in the run's namespace and go with it
// (RunNetwork::Teardown).
#pragma once

#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::microvm {

// Inside network namespace `netns_fd`: creates tap "tap0" (IFF_TAP | IFF_NO_PI), bridge "br0",
// removes every IPv4 address of `uplink_ifname` (its routes go with them), enslaves both to the
// bridge and brings them up. Returns the tap's fd (O_CLOEXEC). Runs on a helper thread that joins
// the namespace; the caller's namespace is never changed.
Result<UniqueFd> AttachGuestTap(int netns_fd, const std::string& uplink_ifname);

// A locally administered unicast MAC derived from the run id (stable, so a run's traffic is easy
// to follow in captures).
std::string GuestMac(const std::string& run_id);

}  // namespace safex::microvm
