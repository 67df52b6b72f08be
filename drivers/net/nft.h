// nftables over libnftables: the run's rulesets (built as nft text, shown verbatim in
// docs/network.md), running them inside a namespace, and reading their drop counters.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "plan/plan.h"

namespace safex::drivers::net {

// One permitted flow: destination address (IPv4, host order), port and protocol.
struct EgressFlow {
  uint32_t daddr = 0;
  uint16_t port = 0;
  plan::Protocol protocol = plan::Protocol::kTcp;
  bool operator==(const EgressFlow& o) const {
    return daddr == o.daddr && port == o.port && protocol == o.protocol;
  }
};

// Counter names (nft named counters). Egress attempts the rules refused are the sum of
// kDeniedEgress (run namespace), kDeniedForward and kDeniedHost (uplink namespace).
inline constexpr char kDeniedEgress[] = "denied_egress";    // run ns: output dropped
inline constexpr char kDeniedIngress[] = "denied_ingress";  // run ns: unsolicited input dropped
inline constexpr char kDeniedForward[] = "denied_forward";  // uplink: forward from the run dropped
inline constexpr char kDeniedHost[] = "denied_host";        // uplink: to the host itself dropped
inline constexpr char kDeniedInbound[] = "denied_inbound";  // uplink: new flows toward the run

// The table inside the run's own namespace (always this name: the namespace is the run's).
inline constexpr char kRunTable[] = "safex";

// Destinations refused before any allow rule, whatever the plan says: "this network", loopback,
// link-local (holds 169.254.169.254 and 169.254.170.2), other metadata endpoints, multicast,
// reserved/broadcast, and the pool itself (other runs). IPv6 is dropped entirely (IPv4-only runs).
std::string NeverReachableV4Elements(const std::string& pool_cidr);

// Ruleset for the run's namespace: output default drop except the flows; input only replies.
std::string RunNamespaceRuleset(const std::vector<EgressFlow>& flows, const std::string& pool_cidr);

// Ruleset for the uplink namespace, table `table`: forward only the flows from `sandbox_addr`
// entering on `host_veth`, replies back, masquerade them, and drop everything else from the veth
// (to the host itself, other runs, anything not granted), counting every drop.
std::string UplinkRuleset(const std::string& table, const std::string& host_veth,
                          uint32_t sandbox_addr, const std::vector<EgressFlow>& flows,
                          const std::string& pool_cidr);

// Runs nft commands (text) inside netns_fd (-1: the caller's namespace) and returns nft's output,
// with a fresh libnftables context that is freed afterwards. For the run's own namespace.
// libnftables calls are serialised process-wide (its caches are process globals).
Result<std::string> NftRun(int netns_fd, const std::string& commands);

// The same with a context kept open for the life of the process, one per namespace (keyed by the
// namespace's inode). For the uplink namespace, where every run adds and deletes a table: closing
// an nf_tables netlink socket after a deletion waits for an RCU grace period (about 10-20 ms on
// the reference machine), an open one does not.
Result<std::string> NftRunShared(int netns_fd, const std::string& commands);

// Frees the shared contexts (tests that create and delete uplink namespaces call it so that the
// contexts' sockets do not keep those namespaces alive).
void CloseSharedNftContexts();

// Parses `nft list counters ...` text output: counter name -> packets.
std::map<std::string, uint64_t> ParseCounterPackets(const std::string& nft_output);

}  // namespace safex::drivers::net
