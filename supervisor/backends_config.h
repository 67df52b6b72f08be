// The host config's isolation backends as the registry (drivers/backends.h) takes them: the
// backends offered and their settings, the delegated cgroup, the state root of the runs, and the
// network provider for plans that grant egress. Shared by `safex run` and `safex serve`, so both
// build their backends the same way.
#pragma once

#include <string>

#include "compiler/host_config.h"
#include "drivers/backends.h"

namespace safex::supervisor {

drivers::BackendsConfig BackendsConfigFrom(const compiler::HostConfig& host,
                                           const std::string& state_root);

}  // namespace safex::supervisor
