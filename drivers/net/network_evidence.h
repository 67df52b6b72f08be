// The network part of a run's evidence (drivers/enforcement.h), shared by the backends: what the
// kernel shows of the run's network namespace, read back before the program starts.
#pragma once

#include "drivers/enforcement.h"
#include "drivers/net/run_network.h"

namespace safex::drivers::net {

// Where the sandbox's own address lives: on the veth in the run's namespace (gVisor, native), or
// inside a guest that configured it from that veth's address, which then left the namespace (the
// microVM backend's tap takes the link over).
enum class SandboxAddress { kInNamespace, kInGuest };

// `net` null: the run has no network namespace (no egress), which the backend states itself.
void AddNetworkEvidence(RunNetwork* net, SandboxAddress where, Enforcement* e);

}  // namespace safex::drivers::net
