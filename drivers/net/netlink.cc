#include "drivers/net/netlink.h"

#include <arpa/inet.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <netlink/addr.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "drivers/net/address_pool.h"
#include "drivers/net/netns.h"

namespace safex::drivers::net {
namespace {

Status NlError(const std::string& what, int err) {
  return Status::Unavailable(what + ": " + nl_geterror(err));
}

struct LinkPut {
  void operator()(rtnl_link* l) const { rtnl_link_put(l); }
};
using LinkPtr = std::unique_ptr<rtnl_link, LinkPut>;
struct AddrPut {
  void operator()(nl_addr* a) const { nl_addr_put(a); }
};
using NlAddrPtr = std::unique_ptr<nl_addr, AddrPut>;

NlAddrPtr MakeIpv4(uint32_t host_order, int prefix) {
  uint32_t be = htonl(host_order);
  NlAddrPtr a(nl_addr_build(AF_INET, &be, sizeof(be)));
  if (a) nl_addr_set_prefixlen(a.get(), prefix);
  return a;
}

}  // namespace

void RtnlSocket::Free::operator()(nl_sock* s) const { nl_socket_free(s); }

Result<RtnlSocket> RtnlSocket::OpenIn(int netns_fd) {
  RtnlSocket r;
  r.sk_.reset(nl_socket_alloc());
  if (!r.sk_) return Status::ResourceExhausted("nl_socket_alloc failed");
  // The kernel binds a netlink socket to the namespace of the thread that creates it.
  Status st = RunInNetns(netns_fd, [&]() -> Status {
    int err = nl_connect(r.sk_.get(), NETLINK_ROUTE);
    if (err < 0) return NlError("nl_connect(NETLINK_ROUTE)", err);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return r;
}

Status RtnlSocket::CreateVethPair(const std::string& name, const std::string& peer_name,
                                  int peer_netns_fd) {
  if (name.size() >= IFNAMSIZ || peer_name.size() >= IFNAMSIZ) {
    return Status::InvalidArgument("interface name longer than IFNAMSIZ: " + name);
  }
  LinkPtr link(rtnl_link_veth_alloc());
  if (!link) return Status::ResourceExhausted("rtnl_link_veth_alloc failed");
  rtnl_link_set_name(link.get(), name.c_str());
  LinkPtr peer(rtnl_link_veth_get_peer(link.get()));
  rtnl_link_set_name(peer.get(), peer_name.c_str());
  // Security: the peer is created inside the run's namespace (IFLA_NET_NS_FD on the peer), so the
  // sandbox-side interface never exists in the uplink namespace, not even for a moment.
  rtnl_link_set_ns_fd(peer.get(), peer_netns_fd);
  int err = rtnl_link_add(sk_.get(), link.get(), NLM_F_CREATE | NLM_F_EXCL);
  if (err < 0) return NlError("creating veth " + name + " <-> " + peer_name, err);
  return Status::Ok();
}

Result<int> RtnlSocket::LinkIndex(const std::string& name) {
  rtnl_link* raw = nullptr;
  int err = rtnl_link_get_kernel(sk_.get(), 0, name.c_str(), &raw);
  if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) {
    return Status::NotFound("no interface " + name);
  }
  if (err < 0) return NlError("looking up interface " + name, err);
  LinkPtr link(raw);
  return rtnl_link_get_ifindex(link.get());
}

Result<std::vector<std::string>> RtnlSocket::Ipv4Addresses() {
  nl_cache* addrs = nullptr;
  int err = rtnl_addr_alloc_cache(sk_.get(), &addrs);
  if (err < 0) return NlError("listing addresses", err);
  std::vector<std::string> out;
  for (nl_object* o = nl_cache_get_first(addrs); o != nullptr; o = nl_cache_get_next(o)) {
    auto* a = reinterpret_cast<rtnl_addr*>(o);
    if (rtnl_addr_get_family(a) != AF_INET || rtnl_addr_get_local(a) == nullptr) continue;
    char text[64];
    nl_addr2str(rtnl_addr_get_local(a), text, sizeof text);
    const char* label = rtnl_addr_get_label(a);
    out.push_back(std::string(label != nullptr ? label : "?") + " " + text);
  }
  nl_cache_free(addrs);
  std::sort(out.begin(), out.end());
  return out;
}

Status RtnlSocket::SetLinkUp(int ifindex) {
  LinkPtr orig(rtnl_link_alloc());
  LinkPtr change(rtnl_link_alloc());
  if (!orig || !change) return Status::ResourceExhausted("rtnl_link_alloc failed");
  rtnl_link_set_ifindex(orig.get(), ifindex);
  rtnl_link_set_flags(change.get(), IFF_UP);
  int err = rtnl_link_change(sk_.get(), orig.get(), change.get(), 0);
  if (err < 0) return NlError("setting interface " + std::to_string(ifindex) + " up", err);
  return Status::Ok();
}

Status RtnlSocket::AddIpv4Address(int ifindex, uint32_t addr, int prefix) {
  std::unique_ptr<rtnl_addr, void (*)(rtnl_addr*)> a(rtnl_addr_alloc(), rtnl_addr_put);
  NlAddrPtr local = MakeIpv4(addr, prefix);
  if (!a || !local) return Status::ResourceExhausted("rtnl_addr_alloc failed");
  rtnl_addr_set_ifindex(a.get(), ifindex);
  rtnl_addr_set_family(a.get(), AF_INET);
  int err = rtnl_addr_set_local(a.get(), local.get());
  if (err == 0) err = rtnl_addr_add(sk_.get(), a.get(), NLM_F_CREATE | NLM_F_EXCL);
  if (err < 0) {
    return NlError("adding address " + Ipv4ToString(addr) + "/" + std::to_string(prefix), err);
  }
  return Status::Ok();
}

Status RtnlSocket::AddDefaultRoute(uint32_t gateway, int ifindex) {
  std::unique_ptr<rtnl_route, void (*)(rtnl_route*)> r(rtnl_route_alloc(), rtnl_route_put);
  NlAddrPtr dst = MakeIpv4(0, 0);
  NlAddrPtr gw = MakeIpv4(gateway, 32);
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  if (!r || !dst || !gw || !nh) {
    if (nh) rtnl_route_nh_free(nh);
    return Status::ResourceExhausted("rtnl_route_alloc failed");
  }
  rtnl_route_set_family(r.get(), AF_INET);
  rtnl_route_set_table(r.get(), RT_TABLE_MAIN);
  rtnl_route_set_protocol(r.get(), RTPROT_STATIC);
  rtnl_route_set_scope(r.get(), RT_SCOPE_UNIVERSE);
  rtnl_route_set_type(r.get(), RTN_UNICAST);
  int err = rtnl_route_set_dst(r.get(), dst.get());
  if (err < 0) {
    rtnl_route_nh_free(nh);
    return NlError("default route", err);
  }
  rtnl_route_nh_set_ifindex(nh, ifindex);
  rtnl_route_nh_set_gateway(nh, gw.get());
  rtnl_route_add_nexthop(r.get(), nh);  // the route owns nh from here
  err = rtnl_route_add(sk_.get(), r.get(), NLM_F_CREATE | NLM_F_EXCL);
  if (err < 0) return NlError("adding default route", err);
  return Status::Ok();
}

Status RtnlSocket::WaitOperUp(int ifindex, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    rtnl_link* raw = nullptr;
    int err = rtnl_link_get_kernel(sk_.get(), ifindex, nullptr, &raw);
    if (err < 0) return NlError("reading interface " + std::to_string(ifindex), err);
    LinkPtr link(raw);
    if (rtnl_link_get_operstate(link.get()) == IF_OPER_UP) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Unavailable("interface " + std::to_string(ifindex) + " not up after " +
                                 std::to_string(timeout_ms) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Status RtnlSocket::DeleteLink(const std::string& name, bool* existed) {
  if (existed) *existed = false;
  LinkPtr link(rtnl_link_alloc());
  if (!link) return Status::ResourceExhausted("rtnl_link_alloc failed");
  rtnl_link_set_name(link.get(), name.c_str());
  int err = rtnl_link_delete(sk_.get(), link.get());
  if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) return Status::Ok();
  if (err < 0) return NlError("deleting interface " + name, err);
  if (existed) *existed = true;
  return Status::Ok();
}

}  // namespace safex::drivers::net
