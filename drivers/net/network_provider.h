// The one seam between the isolation backends and per-run networks (docs/network.md): a backend
// whose plan grants egress asks the provider for the run's network and owns it for the run
// (netns_fd to start the sandbox in, hosts_file for its /etc/hosts, sandbox_link for a guest that
// brings its own stack, DeniedCount for the audit record, Teardown once every process is gone).
// The supervisor builds the provider (supervisor/network.h: resolution of the granted names,
// then RunNetwork::Create); backends only call it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "drivers/net/run_network.h"
#include "plan/plan.h"

namespace safex::drivers::net {

// Called only for plans whose network.egress is non-empty. An error refuses the run.
using NetworkProvider = std::function<Result<std::unique_ptr<RunNetwork>>(
    const plan::Plan& plan, const std::string& run_id)>;

}  // namespace safex::drivers::net
