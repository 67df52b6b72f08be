// The operator's host config: the ceilings no policy may exceed on this host, written in the policy
// language. Default location /etc/safex/host.policy; when the file is absent the built-in
// plan::DefaultCeilings() apply.
//
//   host {
//     ceilings {                       # each optional; an absent one keeps its built-in default
//       wall_time = 1h  cpu_time = 1h  memory = 8GiB  pids = 4096
//       open_files = 65536  output = 1GiB  disk = 16GiB  cpus = 64
//     }
//     backends = [gvisor, microvm]     # add `native` to let trusted policies use it
//     allow_egress_ranges = ["10.20.0.0/16"]   # private/CGNAT ranges policies may reach
//     forbid_mounts = ["/srv/secrets"]         # host paths no policy may bind
//   }
//
// Sections are dispatched through one table (kSections in host_config.cc): a later `service { }`
// section (allowed users per policy, policy dir, address pool, concurrency) adds one entry there
// and one field to HostConfig. Unknown sections and keys are errors (E020), as in policies.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "dsl/diagnostics.h"
#include "plan/ceilings.h"

namespace safex::compiler {

inline constexpr const char* kDefaultHostConfigPath = "/etc/safex/host.policy";

// Per-run networks for plans that grant egress (drivers/net; docs/network.md).
//   network {
//     pool = "198.18.128.0/17"       # IPv4 range for the runs' links, one /30 per run
//     uplink = "/run/netns/uplink"   # namespace that carries permitted traffic on ("" = the host's)
//     manage_ip_forward = true       # turn forwarding on in the uplink when a run needs it
//   }
struct NetworkSettings {
  std::string pool = "198.18.128.0/17";
  std::string uplink_netns;
  bool manage_ip_forward = true;
};

struct HostConfig {
  plan::Ceilings ceilings = plan::DefaultCeilings();
  NetworkSettings network;
};

// Parses host config text. Returns false and appends diagnostics (all of them) on error.
bool ParseHostConfig(const std::string& path, const std::string& text, HostConfig* out,
                     std::vector<dsl::Diagnostic>* diagnostics);

// Reads the host config at `path`. Absent file -> DefaultCeilings(). Any other problem is an
// InvalidArgument whose message holds the rendered diagnostics.
Result<plan::Ceilings> LoadHostConfig(const std::string& path = kDefaultHostConfigPath);
// The whole host config (ceilings and every other section); absent file -> defaults.
Result<HostConfig> LoadHostConfigFile(const std::string& path = kDefaultHostConfigPath);

}  // namespace safex::compiler
