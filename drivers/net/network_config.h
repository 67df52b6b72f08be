// NetworkConfig: the operator's settings for per-run networks (from the host config). One value
// per supervisor; every RunNetwork of that supervisor uses it.
#pragma once

#include <string>

#include "common/status.h"

namespace safex::drivers::net {

struct NetworkConfig {
  // IPv4 range the per-run links are carved from, one /30 per run (host end .1, sandbox end .2).
  // 198.18.128.0/17 (upper half of the RFC 2544 benchmarking range) by default: not routed on the
  // internet and unlikely to collide with an operator's LAN. 8192 concurrent runs.
  std::string pool_cidr = "198.18.128.0/17";
  // The namespace that carries a sandbox's permitted traffic onward: "" is the supervisor's own
  // (the host's) network namespace; otherwise a netns file such as /run/netns/uplink.
  std::string uplink_netns;
  // Per-slot allocation records and their locks (tmpfs; shared by every safex process on the host
  // so that concurrent `safex run` CLIs and the daemon never hand out the same addresses).
  std::string state_dir = "/run/safex/net";
  // Where run namespaces are pinned (bind mounts): the iproute2 directory, so that
  // `ip netns list` shows a leak as safex-<run-id>.
  std::string netns_dir = "/run/netns";
  // Forwarding must be on in the uplink namespace (net.ipv4.ip_forward) for replies to reach the
  // sandbox. true: set it when a run with egress starts and it is off (a namespace-wide setting;
  // for the host uplink that is a HOST-WIDE change, see docs/network.md). false: refuse the run
  // with a message telling the operator to enable it.
  bool manage_ip_forward = true;
  // Highest number of slots scanned (caps the pool when the CIDR is larger than this many /30s).
  uint32_t max_slots = 8192;
};

// Checks the pool (IPv4, prefix 8..30, base aligned) and the paths (absolute or empty uplink).
Status ValidateNetworkConfig(const NetworkConfig& cfg);

}  // namespace safex::drivers::net
