// N6: raw and packet sockets, and route / link changes over netlink and ioctl. Contained: raw
// and packet sockets EPERM (or unsupported), route and link changes refused (EPERM), or - where
// the sandbox's own network stack accepts them - confined to the sandbox (no host route appears;
// the runner checks).
#include <linux/if.h>
#include <linux/if_ether.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "probe.h"

static int TryRouteAdd(void) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return errno;
  struct {
    struct nlmsghdr nh;
    struct rtmsg rt;
    char attrs[64];
  } req;
  memset(&req, 0, sizeof req);
  req.nh.nlmsg_type = RTM_NEWROUTE;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
  req.nh.nlmsg_seq = 1;
  req.rt.rtm_family = AF_INET;
  req.rt.rtm_dst_len = 24;
  req.rt.rtm_table = RT_TABLE_MAIN;
  req.rt.rtm_protocol = RTPROT_STATIC;
  req.rt.rtm_scope = RT_SCOPE_LINK;
  req.rt.rtm_type = RTN_UNICAST;
  size_t len = NLMSG_LENGTH(sizeof req.rt);
  struct rtattr* a = (struct rtattr*)((char*)&req + NLMSG_ALIGN(len));
  a->rta_type = RTA_DST;
  a->rta_len = RTA_LENGTH(4);
  unsigned char dst[4] = {198, 18, 77, 0};
  memcpy(RTA_DATA(a), dst, 4);
  len = NLMSG_ALIGN(len) + RTA_ALIGN(a->rta_len);
  a = (struct rtattr*)((char*)&req + len);
  a->rta_type = RTA_OIF;
  a->rta_len = RTA_LENGTH(4);
  int lo = 1;
  memcpy(RTA_DATA(a), &lo, 4);
  len += RTA_ALIGN(a->rta_len);
  req.nh.nlmsg_len = (unsigned)len;
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  if (sendto(fd, &req, len, 0, (struct sockaddr*)&kernel, sizeof kernel) < 0) {
    int e = errno;
    close(fd);
    return e;
  }
  char buf[4096];
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  close(fd);
  if (n < 0) return errno;
  struct nlmsghdr* h = (struct nlmsghdr*)buf;
  if (h->nlmsg_type == NLMSG_ERROR) {
    struct nlmsgerr* e = (struct nlmsgerr*)NLMSG_DATA(h);
    return -e->error;
  }
  return EPROTO;
}

int main(void) {
  Probe p;
  probe_begin(&p, "N6", "raw/packet sockets and netlink route changes");
  int raw = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
  int raw_err = raw < 0 ? errno : 0;
  int pkt = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  int pkt_err = pkt < 0 ? errno : 0;
  int route_err = TryRouteAdd();
  int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int ifdown_err = EBADF;
  if (sock >= 0) {
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strcpy(ifr.ifr_name, "lo");
    ifdown_err = ioctl(sock, SIOCSIFFLAGS, &ifr) == 0 ? 0 : errno;
    close(sock);
  }
  probe_err(&p, "raw_socket", raw_err);
  probe_err(&p, "packet_socket", pkt_err);
  probe_err(&p, "netlink_route_add", route_err);
  probe_err(&p, "ioctl_lo_down", ifdown_err);
  if (raw >= 0 || pkt >= 0) probe_escaped(&p);
  if (route_err == 0 || ifdown_err == 0) probe_escaped(&p);
  if (raw >= 0) close(raw);
  if (pkt >= 0) close(pkt);
  char result[200];
  snprintf(result, sizeof result, "raw %s, packet %s, route add %s, link down %s",
           probe_errname(raw_err), probe_errname(pkt_err), probe_errname(route_err),
           probe_errname(ifdown_err));
  return probe_finish(&p, result);
}
