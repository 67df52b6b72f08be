// A stand-in "sandbox" process and a crash victim for the network tests.
//
//   net_test_helper probe NETNS_PATH tcp|udp ADDR PORT TIMEOUT_MS
//     joins the network namespace, then connects (tcp: and reads the server's "ok" banner) or
//     sends a datagram and waits for the reply (udp). Prints one line and exits:
//     0 "reached", 1 "blocked: <why>" (timeout, EPERM, unreachable), 2 "refused", 3 error.
//   net_test_helper hold UPLINK STATE_DIR POOL RUN_ID ADDR:PORT
//     creates a RunNetwork granting tcp ADDR:PORT, prints "ready <pin> <veth> <table>" and
//     sleeps until killed (the crash test SIGKILLs it).
//   net_test_helper cleanup UPLINK STATE_DIR POOL
//     runs CleanupStale and prints how many stale runs it removed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "drivers/net/run_network.h"

namespace {

int Blocked(const char* why) {
  std::printf("blocked: %s\n", why);
  return 1;
}

int Classify(int err) {
  if (err == ECONNREFUSED) {
    std::printf("refused\n");
    return 2;
  }
  return Blocked(std::strerror(err));
}

bool WaitFor(int fd, short events, int timeout_ms) {
  struct pollfd p = {fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

int Probe(const char* netns, const std::string& proto, const char* addr, int port, int timeout_ms) {
  int ns = ::open(netns, O_RDONLY | O_CLOEXEC);
  if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
    std::printf("error: setns %s: %s\n", netns, std::strerror(errno));
    return 3;
  }
  ::close(ns);
  struct sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
    std::printf("error: bad address %s\n", addr);
    return 3;
  }
  const bool tcp = proto == "tcp";
  int fd = ::socket(AF_INET, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    std::printf("error: socket: %s\n", std::strerror(errno));
    return 3;
  }
  char buf[16] = {};
  if (tcp) {
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      if (errno != EINPROGRESS) return Classify(errno);
      if (!WaitFor(fd, POLLOUT, timeout_ms)) return Blocked("timeout");
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return Classify(err);
    }
  } else {
    if (::sendto(fd, "ping", 4, 0, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) < 0) {
      return Classify(errno);
    }
  }
  if (!WaitFor(fd, POLLIN, timeout_ms)) return Blocked("timeout waiting for the reply");
  ssize_t n = ::recv(fd, buf, sizeof(buf) - 1, 0);
  if (n < 0) return Classify(errno);
  if (std::string(buf, static_cast<size_t>(n)).rfind("ok", 0) != 0) {
    std::printf("error: unexpected reply\n");
    return 3;
  }
  std::printf("reached\n");
  return 0;
}

int Hold(const char* uplink, const char* state, const char* pool, const char* run_id,
         const std::string& dest) {
  using namespace safex::drivers::net;
  NetworkConfig cfg;
  cfg.uplink_netns = uplink;
  cfg.state_dir = state;
  cfg.pool_cidr = pool;
  size_t colon = dest.rfind(':');
  auto addr = safex::plan::IpAddress::Parse(dest.substr(0, colon));
  if (colon == std::string::npos || !addr) {
    std::printf("error: bad destination\n");
    return 3;
  }
  ResolvedEgress e;
  e.rule.host = dest.substr(0, colon);
  e.rule.port = static_cast<uint16_t>(std::atoi(dest.c_str() + colon + 1));
  e.literal = true;
  e.addresses.push_back(*addr);
  auto net = RunNetwork::Create(cfg, run_id, {e});
  if (!net.ok()) {
    std::printf("error: %s\n", net.status().ToString().c_str());
    return 3;
  }
  std::printf("ready %s %s %s %s\n", net->netns_path().c_str(), net->host_veth().c_str(),
              net->nft_table().c_str(), net->sandbox_link().AddressString().c_str());
  std::fflush(stdout);
  for (;;) ::pause();
}

int Cleanup(const char* uplink, const char* state, const char* pool) {
  safex::drivers::net::NetworkConfig cfg;
  cfg.uplink_netns = uplink;
  cfg.state_dir = state;
  cfg.pool_cidr = pool;
  int n = 0;
  auto st = safex::drivers::net::CleanupStale(cfg, &n);
  std::printf("cleaned %d%s%s\n", n, st.ok() ? "" : ": ", st.ok() ? "" : st.ToString().c_str());
  return st.ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 7 && std::strcmp(argv[1], "probe") == 0) {
    return Probe(argv[2], argv[3], argv[4], std::atoi(argv[5]), std::atoi(argv[6]));
  }
  if (argc == 7 && std::strcmp(argv[1], "hold") == 0) {
    return Hold(argv[2], argv[3], argv[4], argv[5], argv[6]);
  }
  if (argc == 5 && std::strcmp(argv[1], "cleanup") == 0) return Cleanup(argv[2], argv[3], argv[4]);
  std::fprintf(stderr, "usage: see the comment at the top of net_test_helper.cc\n");
  return 3;
}
