#include "guest/net_setup.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "guest/util.h"

namespace safex::guest {
namespace {

class Sock {
 public:
  Sock() : fd_(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {}
  ~Sock() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

bool SetAddr(sockaddr* sa, const std::string& dotted) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  if (inet_pton(AF_INET, dotted.c_str(), &sin.sin_addr) != 1) return false;
  std::memcpy(sa, &sin, sizeof sin);
  return true;
}

std::string Up(int fd, const char* ifname) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0)
    return ErrnoMessage(std::string("SIOCGIFFLAGS ") + ifname);
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0)
    return ErrnoMessage(std::string("SIOCSIFFLAGS ") + ifname);
  return "";
}

// Runs are IPv4-only (the run's network routes IPv4 only, and under gVisor the run's namespace
// has IPv6 switched off). Without this the guest kernel's own IPv6 chatter on eth0 (router
// solicitations, duplicate address detection) would be dropped and counted as denied egress.
// A kernel without IPv6 has no such files: nothing to switch off.
std::string DisableIpv6() {
  for (const char* p :
       {"/proc/sys/net/ipv6/conf/all/disable_ipv6", "/proc/sys/net/ipv6/conf/default/disable_ipv6",
        "/proc/sys/net/ipv6/conf/eth0/disable_ipv6"}) {
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;
      return ErrnoMessage(std::string("open ") + p);
    }
    bool ok = write(fd, "1", 1) == 1;
    int err = errno;
    close(fd);
    if (!ok) {
      errno = err;
      return ErrnoMessage(std::string("write ") + p);
    }
  }
  return "";
}

}  // namespace

std::string BringUpLoopback() {
  Sock s;
  if (s.fd() < 0) return ErrnoMessage("socket");
  return Up(s.fd(), "lo");
}

std::string ConfigureEthernet(const microvm::GuestNetwork& net) {
  Sock s;
  if (s.fd() < 0) return ErrnoMessage("socket");
  if (net.prefix < 8 || net.prefix > 30) return "bad prefix length";
  const char* ifname = "eth0";
  // Before eth0 goes up: its first packets would otherwise be IPv6.
  if (std::string e = DisableIpv6(); !e.empty()) return e;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
  if (!SetAddr(&ifr.ifr_addr, net.address)) return "bad address " + net.address;
  if (ioctl(s.fd(), SIOCSIFADDR, &ifr) != 0) return ErrnoMessage("SIOCSIFADDR eth0");
  uint32_t mask = htonl(~((1u << (32 - net.prefix)) - 1));
  sockaddr_in m{};
  m.sin_family = AF_INET;
  m.sin_addr.s_addr = mask;
  std::memcpy(&ifr.ifr_netmask, &m, sizeof m);
  if (ioctl(s.fd(), SIOCSIFNETMASK, &ifr) != 0) return ErrnoMessage("SIOCSIFNETMASK eth0");
  if (std::string e = Up(s.fd(), ifname); !e.empty()) return e;
  rtentry rt{};
  SetAddr(&rt.rt_dst, "0.0.0.0");
  SetAddr(&rt.rt_genmask, "0.0.0.0");
  if (!SetAddr(&rt.rt_gateway, net.gateway)) return "bad gateway " + net.gateway;
  rt.rt_flags = RTF_UP | RTF_GATEWAY;
  char dev[IFNAMSIZ];
  std::strncpy(dev, ifname, IFNAMSIZ - 1);
  dev[IFNAMSIZ - 1] = '\0';
  rt.rt_dev = dev;
  if (ioctl(s.fd(), SIOCADDRT, &rt) != 0) return ErrnoMessage("SIOCADDRT default");
  return "";
}

}  // namespace safex::guest
