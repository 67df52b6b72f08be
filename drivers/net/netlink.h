// Route netlink over libnl-route-3: links (veth), IPv4 addresses, routes. No `ip` command.
// An RtnlSocket is bound to one network namespace for its whole life (the namespace it was
// opened in); every call through it acts on that namespace.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

struct nl_sock;

namespace safex::drivers::net {

class RtnlSocket {
 public:
  // Opens a NETLINK_ROUTE socket inside the namespace netns_fd (-1: the caller's).
  static Result<RtnlSocket> OpenIn(int netns_fd);

  RtnlSocket() = default;
  RtnlSocket(RtnlSocket&&) noexcept = default;
  RtnlSocket& operator=(RtnlSocket&&) noexcept = default;

  // Creates a veth pair: `name` here, its peer `peer_name` directly inside `peer_netns_fd`
  // (created there, never visible in this namespace). Both ends start down.
  Status CreateVethPair(const std::string& name, const std::string& peer_name, int peer_netns_fd);
  // Interface index by name; NotFound if absent.
  Result<int> LinkIndex(const std::string& name);
  Status SetLinkUp(int ifindex);
  // Adds addr/prefix (host order) to ifindex.
  Status AddIpv4Address(int ifindex, uint32_t addr, int prefix);
  // Adds "default via gateway dev ifindex" to the main table.
  Status AddDefaultRoute(uint32_t gateway, int ifindex);
  // Waits until the link's operational state is UP. Bringing a link up is asynchronous in the
  // kernel (linkwatch activates its queueing discipline later); until then packets, ARP
  // included, are dropped, so the sandbox's first connection would stall for a second.
  // DeadlineExceeded-like Unavailable after timeout_ms.
  Status WaitOperUp(int ifindex, int timeout_ms);
  // Every IPv4 address of this namespace as the kernel lists it, "IFNAME ADDR/PREFIX", sorted
  // (the evidence of a run's network; docs/audit.md "Evidence").
  Result<std::vector<std::string>> Ipv4Addresses();
  // Deletes a link by name (a veth takes its peer with it). Ok when it did not exist;
  // *existed (optional) says which.
  Status DeleteLink(const std::string& name, bool* existed = nullptr);

 private:
  struct Free {
    void operator()(nl_sock* s) const;
  };
  std::unique_ptr<nl_sock, Free> sk_;
};

}  // namespace safex::drivers::net
