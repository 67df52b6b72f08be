#include "drivers/microvm/guest_tap.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/if_tun.h>
#include <linux/rtnetlink.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
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

// Creates the bridge (down) with multicast snooping off. With snooping on, a bridge going up
// joins the all-snoopers group (RFC 4286) and sends IGMP reports from the run's namespace, which
// its own rules drop and count as denied egress although nobody in the run sent anything.
Status CreateBridge(nl_sock* sk, const char* name) {
  std::unique_ptr<nl_msg, void (*)(nl_msg*)> msg(
      nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL), nlmsg_free);
  if (!msg) return Status::ResourceExhausted("nlmsg_alloc failed");
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  int err = nlmsg_append(msg.get(), &ifi, sizeof(ifi), NLMSG_ALIGNTO);
  if (err == 0) err = nla_put_string(msg.get(), IFLA_IFNAME, name);
  nlattr* info = err == 0 ? nla_nest_start(msg.get(), IFLA_LINKINFO) : nullptr;
  if (info == nullptr) return NlError("building the bridge request", err < 0 ? err : -NLE_NOMEM);
  err = nla_put_string(msg.get(), IFLA_INFO_KIND, "bridge");
  nlattr* data = err == 0 ? nla_nest_start(msg.get(), IFLA_INFO_DATA) : nullptr;
  if (data == nullptr) return NlError("building the bridge request", err < 0 ? err : -NLE_NOMEM);
  err = nla_put_u8(msg.get(), IFLA_BR_MCAST_SNOOPING, 0);
  if (err < 0) return NlError("building the bridge request", err);
  nla_nest_end(msg.get(), data);
  nla_nest_end(msg.get(), info);
  err = nl_send_sync(sk, msg.release());  // takes the message
  if (err < 0) return NlError("creating the bridge", err);
  return Status::Ok();
}

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
    SAFEX_RETURN_IF_ERROR(CreateBridge(sk.get(), kBridgeName));
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
