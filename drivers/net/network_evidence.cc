#include "drivers/net/network_evidence.h"

namespace safex::drivers::net {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

void AddNetworkEvidence(RunNetwork* net, SandboxAddress where, Enforcement* e) {
  if (net == nullptr) return;
  Result<RunNetwork::ReadBack> seen = net->ReadBackFromKernel();
  if (!seen.ok()) {
    e->Compare("network", "a readable namespace", "", "host kernel: " + seen.status().message());
    return;
  }
  std::vector<std::string> expected = seen->expected_addresses;
  if (where == SandboxAddress::kInGuest) {
    // Only loopback stays in the namespace; the guest's eth0 is set up by the guest agent.
    expected = {"lo 127.0.0.1/8"};
    e->NotObserved(
        "network.guest_address",
        "configured inside the VM by the guest agent from " + Join(seen->expected_addresses),
        "egress outside the granted set");
  }
  e->Compare("network.addresses", Join(expected), Join(seen->addresses),
             "host kernel: netlink in " + net->netns_path());
  const std::string rules = "host kernel: nftables table of the run's namespace, listed back";
  e->Compare("network.egress_accepts", Join(seen->expected_flows), Join(seen->accepted_flows),
             rules);
  e->Compare("network.chain_policies", "drop, drop", seen->chain_policies, rules);
  e->Observed("network.ruleset_sha256", seen->run_ruleset_sha256,
              "host kernel: nftables ruleset of the run's namespace, as listed back");
  e->Observed("network.uplink_ruleset_sha256", seen->uplink_ruleset_sha256,
              "host kernel: nftables table " + net->nft_table() + " in the uplink namespace");
}

}  // namespace safex::drivers::net
