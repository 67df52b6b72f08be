// The operator's ceilings: what no policy may exceed on this host. Read from the host config
// (/etc/safex/host.policy by default; see compiler/host_config.h); built-in defaults when absent.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace safex::plan {

struct Ceilings {
  Limits max;                          // each limit of a plan must be <= the same field here
  std::set<Backend> allowed_backends;  // native must be listed explicitly to be usable
  // CIDR ranges the operator explicitly admits as egress destinations although they fall in a
  // forbidden class (private, CGNAT, ...). Loopback, link-local and metadata stay forbidden.
  std::vector<std::string> allowed_egress_ranges;
  // Extra host paths no policy may mount (the supervisor's state, runtime and config dirs are
  // always forbidden).
  std::vector<std::string> forbidden_mount_sources;
};

// Built-in defaults, used when the host config is absent.
Ceilings DefaultCeilings();

}  // namespace safex::plan
