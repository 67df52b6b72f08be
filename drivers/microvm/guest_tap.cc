#include "drivers/microvm/guest_tap.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/bridge.h>
#include <netlink/socket.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/sha256.h"
#include "drivers/net/netns.h"

namespace safex::microvm {
namespace {

constexpr const char* kTapName = "tap0";
constexpr const char* kBridgeName = "br0";

Status NlError(const std::string& what, int err) {
  return Status::Unavailable("microvm: " + what + ": " + nl_geterror(err));
}

struct SockFree {
  void operator()(nl_sock* s) const { nl_socket_free(s); }
};
struct CacheFree {
  void operator()(nl_cache* c) const { nl_cache_free(c); }
};
struct LinkPut {
  void operator()(rtnl_link* l) const { rtnl_link_put(l); }
};

Result<int> IfIndex(nl_sock* sk, const char* name) {
  rtnl_link* raw = nullptr;
  int err = rtnl_link_get_kernel(sk, 0, name, &raw);
  if (err < 0) return NlError(std::string("looking up ") + name, err);
  std::unique_ptr<rtnl_link, LinkPut> l(raw);
  return rtnl_link_get_ifindex(l.get());
}

Status SetUp(nl_sock* sk, int ifindex, const char* name) {
  std::unique_ptr<rtnl_link, LinkPut> change(rtnl_link_alloc());
  if (!change) return Status::ResourceExhausted("rtnl_link_alloc failed");
  rtnl_link_set_ifindex(change.get(), ifindex);
  rtnl_link_set_flags(change.get(), IFF_UP);
  int err = rtnl_link_change(sk, change.get(), change.get(), 0);
  if (err < 0) return NlError(std::string("bringing up ") + name, err);
  return Status::Ok();
}

// Deletes every IPv4 address on ifindex (the kernel removes the routes through them).
Status FlushIpv4(nl_sock* sk, int ifindex, const std::string& name) {
  nl_cache* raw = nullptr;
  int err = rtnl_addr_alloc_cache(sk, &raw);
  if (err < 0) return NlError("listing addresses", err);
  std::unique_ptr<nl_cache, CacheFree> cache(raw);
  for (nl_object* o = nl_cache_get_first(cache.get()); o != nullptr; o = nl_cache_get_next(o)) {
    rtnl_addr* a = reinterpret_cast<rtnl_addr*>(o);
    if (rtnl_addr_get_ifindex(a) != ifindex || rtnl_addr_get_family(a) != AF_INET) continue;
    err = rtnl_addr_delete(sk, a, 0);
    if (err < 0) return NlError("removing the address of " + name, err);
  }
  return Status::Ok();
}

}  // namespace

Result<UniqueFd> AttachGuestTap(int netns_fd, const std::string& uplink_ifname) {
  if (netns_fd < 0) return Status::InvalidArgument("microvm: no network namespace for the tap");
  if (uplink_ifname.empty() || uplink_ifname.size() >= IFNAMSIZ) {
    return Status::InvalidArgument("microvm: bad interface name: " + uplink_ifname);
  }
  UniqueFd tap;
  Status st = drivers::net::RunInNetns(netns_fd, [&]() -> Status {
    // The tap is created in the namespace of the thread that issues TUNSETIFF: this one.
    tap.Reset(open("/dev/net/tun", O_RDWR | O_CLOEXEC));
    if (!tap) return Status::Errno("open", "/dev/net/tun", errno);
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", kTapName);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    // Security: TUNSETIFF creates a device only in the run's own (fresh) namespace.
    if (ioctl(tap.get(), TUNSETIFF, &ifr) != 0) return Status::Errno("ioctl", "TUNSETIFF", errno);

    std::unique_ptr<nl_sock, SockFree> sk(nl_socket_alloc());
    if (!sk) return Status::ResourceExhausted("nl_socket_alloc failed");
    int err = nl_connect(sk.get(), NETLINK_ROUTE);
    if (err < 0) return NlError("nl_connect(NETLINK_ROUTE)", err);
    err = rtnl_link_bridge_add(sk.get(), kBridgeName);
    if (err < 0) return NlError("creating the bridge", err);
    SAFEX_ASSIGN_OR_RETURN(int br, IfIndex(sk.get(), kBridgeName));
    SAFEX_ASSIGN_OR_RETURN(int up, IfIndex(sk.get(), uplink_ifname.c_str()));
    SAFEX_ASSIGN_OR_RETURN(int tp, IfIndex(sk.get(), kTapName));
    // The address belongs to the guest now: the namespace itself keeps none, so it neither
    // answers for it nor routes anything of its own.
    SAFEX_RETURN_IF_ERROR(FlushIpv4(sk.get(), up, uplink_ifname));
    err = rtnl_link_enslave_ifindex(sk.get(), br, up);
    if (err < 0) return NlError("adding " + uplink_ifname + " to the bridge", err);
    err = rtnl_link_enslave_ifindex(sk.get(), br, tp);
    if (err < 0) return NlError("adding the tap to the bridge", err);
    SAFEX_RETURN_IF_ERROR(SetUp(sk.get(), tp, kTapName));
    SAFEX_RETURN_IF_ERROR(SetUp(sk.get(), up, uplink_ifname.c_str()));
    SAFEX_RETURN_IF_ERROR(SetUp(sk.get(), br, kBridgeName));
    return Status::Ok();
  });
  if (!st.ok()) return st.With("microvm: attaching the guest to the run's network");
  return tap;
}

std::string GuestMac(const std::string& run_id) {
  Sha256Digest d = Sha256("safex-guest-mac:" + run_id);
  char buf[18];
  // 0x02: locally administered, unicast.
  std::snprintf(buf, sizeof(buf), "02:%02x:%02x:%02x:%02x:%02x", d[0], d[1], d[2], d[3], d[4]);
  return buf;
}

}  // namespace safex::microvm
