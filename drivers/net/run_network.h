// RunNetwork: the network of one run that was granted egress. Owns, and removes on destruction:
//   - a fresh network namespace pinned at <netns_dir>/safex-<run-id> (the sandbox starts in it),
//   - a veth pair: sx<id> in the uplink namespace (gateway .1 of the run's /30) and eth0 inside
//     the run's namespace (.2, default route via .1), configured over netlink (libnl),
//   - nftables: table inet safex in the run's namespace (output: default drop except the granted
//     flows) and table inet safex_<id> in the uplink namespace (forward only those flows from this
//     run's address, masquerade them, drop everything else from the veth; drops are counted),
//   - the run's /30 of the address pool (a locked slot record, see address_pool.h).
// A run without egress gets none of this: no network at all (gVisor --network=none).
//
// For drivers: gVisor starts runsc inside netns_fd() with --network=host, so the sandbox uses eth0.
// A microVM driver starts QEMU inside netns_fd() and hands sandbox_link() to the guest (see
// docs/network.md, "microVM").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/run_id.h"
#include "common/status.h"
#include "drivers/net/network_config.h"
#include "drivers/net/resolve.h"

namespace safex::drivers::net {

// How the sandbox side of the run's link is configured.
struct SandboxLink {
  std::string ifname = "eth0";  // interface inside the run's namespace
  uint32_t address = 0;         // host order
  uint32_t gateway = 0;         // host order: the uplink end of the veth
  int prefix = 30;
  std::string AddressString() const;
  std::string GatewayString() const;
};

// Packets the rules dropped, by place. Egress() is what the audit log records as denied egress.
struct DeniedCounts {
  uint64_t run_output = 0;      // run ns, output chain: attempts to leave toward a non-granted dest
  uint64_t run_input = 0;       // run ns, input chain: unsolicited packets toward the sandbox
  uint64_t uplink_forward = 0;  // uplink, forward: from the run to a non-granted destination
  uint64_t uplink_host = 0;     // uplink, input: from the run to the uplink host itself
  uint64_t uplink_inbound = 0;  // uplink, forward: new flows toward the run (other runs, outside)
  uint64_t Egress() const { return run_output + uplink_forward + uplink_host; }
};

class RunNetwork {
 public:
  // Creates the run's network. `run_id`: 1..64 of [a-z0-9-], unique among live runs.
  // `egress`: from ResolveEgress; must be non-empty. Only IPv4 answers are routed (a rule with no
  // IPv4 answer is refused); addresses in the pool or in a never-reachable class are refused.
  // Fails closed: on any error nothing of the run remains.
  static Result<RunNetwork> Create(const NetworkConfig& cfg, const std::string& run_id,
                                   const std::vector<ResolvedEgress>& egress);

  RunNetwork(RunNetwork&&) noexcept;
  RunNetwork& operator=(RunNetwork&&) noexcept;
  ~RunNetwork();  // Teardown(), errors ignored (the slot record keeps them for CleanupStale)

  // fd of the run's network namespace (O_CLOEXEC): setns(fd, CLONE_NEWNET) before exec'ing the
  // sandbox. Valid until Teardown.
  int netns_fd() const;
  // Path of the pin (for tools: `ip netns exec`, nsenter --net=).
  const std::string& netns_path() const;
  // The sandbox's /etc/hosts: localhost plus every granted name with its routed addresses.
  const std::string& hosts_file() const;
  const SandboxLink& sandbox_link() const;
  const std::string& host_veth() const;  // in the uplink namespace
  const std::string& nft_table() const;  // in the uplink namespace
  // The granted flows as installed ("198.18.1.10:8080/tcp"), for the audit log.
  std::vector<std::string> FlowStrings() const;

  // What the kernel shows of this network, for the run's evidence: the addresses inside the run's
  // namespace ("eth0 198.18.128.2/30", "lo 127.0.0.1/8"), what they should be, and the SHA-256
  // of each ruleset as nftables lists it back (run namespace, uplink table).
  struct ReadBack {
    std::vector<std::string> addresses;
    std::vector<std::string> expected_addresses;
    // The accept rules of the run namespace's output chain, parsed from the listing, and the
    // granted flows ("198.18.1.10:8080/tcp", both sorted); each base chain's policy in order.
    std::vector<std::string> accepted_flows;
    std::vector<std::string> expected_flows;
    std::string chain_policies;
    std::string run_ruleset_sha256;
    std::string uplink_ruleset_sha256;
  };
  Result<ReadBack> ReadBackFromKernel();

  // Reads the drop counters now (live), or returns the values read at Teardown.
  Result<DeniedCounts> ReadDenied();
  // Convenience for the audit event: ReadDenied().Egress(), 0 if the counters cannot be read.
  uint64_t DeniedCount();

  // Reads the counters a last time, then removes the uplink table, the veth, the namespace pin
  // and the address slot. Idempotent. On error the slot record is kept, so that CleanupStale or
  // the next allocation of that slot removes what is left.
  Status Teardown();
  // The same, but only the counters are read before it returns: the removal (whose veth deletion
  // waits for kernel RCU grace periods, ~25 ms on the reference machine) runs on a background
  // thread that keeps the run's address slot locked until everything is gone. If the process
  // exits first, the slot's record stays and the next allocation of that slot or CleanupStale
  // removes the rest. Errors surface in WaitForBackgroundTeardowns().
  void TeardownInBackground();

 private:
  struct State;
  explicit RunNetwork(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// Waits for every TeardownInBackground of this process to finish; returns (and forgets) the first
// error among them. A process that used TeardownInBackground calls it before exiting.
Status WaitForBackgroundTeardowns();

// Crash recovery (the daemon calls it at start; tests after killing a holder): removes the
// namespaces, veths, uplink tables and address slots of every run whose owner is gone. Live runs
// (their slot still locked by a living process) are left alone. `cleaned` gets the count.
Status CleanupStale(const NetworkConfig& cfg, int* cleaned = nullptr);

// Deterministic names of a run's resources.
std::string RunShortId(const std::string& run_id);       // 12 hex chars of SHA-256(run_id)
std::string HostVethName(const std::string& run_id);     // "sx" + short id (14 < IFNAMSIZ)
std::string UplinkTableName(const std::string& run_id);  // "safex_" + short id
std::string NetnsPinName(const std::string& run_id);     // "safex-" + run_id
using ::safex::IsValidRunId;                             // common/run_id.h

}  // namespace safex::drivers::net
