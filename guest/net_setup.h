// Guest network configuration: loopback always; eth0 (virtio-net) only when the plan grants
// egress, with the address and default route the host's run network assigned. The workload shares
// the guest's network namespace, so this is exactly the network it sees.
#pragma once

#include <string>

#include "drivers/microvm/guest_spec.h"

namespace safex::guest {

// Returns "" or an error.
std::string BringUpLoopback();
std::string ConfigureEthernet(const microvm::GuestNetwork& net);

}  // namespace safex::guest
