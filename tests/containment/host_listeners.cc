#include "tests/containment/host_listeners.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <future>

namespace safex::containment {
namespace {

constexpr size_t kMaxEndpoints = 64;

// socket() inside another network namespace: on a helper thread that joins it (a namespace
// belongs to a thread; the caller's thread never moves).
int SocketIn(int netns_fd, int family, int type) {
  if (netns_fd < 0) return socket(family, type | SOCK_CLOEXEC, 0);
  auto f = std::async(std::launch::async, [=] {
    // Security: only this short-lived helper thread enters the suite's own test namespace.
    if (setns(netns_fd, CLONE_NEWNET) != 0) return -1;
    return socket(family, type | SOCK_CLOEXEC, 0);
  });
  return f.get();
}

}  // namespace

HostListeners::HostListeners() : hits_(new std::atomic<int>[kMaxEndpoints]) {
  for (size_t i = 0; i < kMaxEndpoints; ++i) hits_[i] = 0;
  int p[2];
  if (pipe2(p, O_CLOEXEC) == 0) {
    stop_r_ = UniqueFd(p[0]);
    stop_w_ = UniqueFd(p[1]);
  }
}

HostListeners::~HostListeners() {
  if (thread_.joinable()) {
    char c = 0;
    ssize_t ignored = write(stop_w_.get(), &c, 1);
    (void)ignored;
    thread_.join();
  }
}

std::string HostListeners::Add(int fd, bool stream, const std::string& spec) {
  if (endpoints_.size() >= kMaxEndpoints) {
    close(fd);
    error_ = "too many endpoints";
    return "";
  }
  endpoints_.push_back({spec, stream, UniqueFd(fd)});
  return spec;
}

std::string HostListeners::Tcp(const std::string& addr, int port, int netns_fd) {
  int fd = SocketIn(netns_fd, AF_INET, SOCK_STREAM);
  if (fd < 0) {
    error_ = std::string("socket: ") + strerror(errno);
    return "";
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  socklen_t len = sizeof sa;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    error_ = "tcp " + addr + ": " + strerror(errno);
    close(fd);
    return "";
  }
  return Add(fd, true, "tcp:" + addr + ":" + std::to_string(ntohs(sa.sin_port)));
}

std::string HostListeners::Udp(const std::string& addr, int port, int netns_fd) {
  int fd = SocketIn(netns_fd, AF_INET, SOCK_DGRAM);
  if (fd < 0) {
    error_ = std::string("socket: ") + strerror(errno);
    return "";
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  socklen_t len = sizeof sa;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    error_ = "udp " + addr + ": " + strerror(errno);
    close(fd);
    return "";
  }
  return Add(fd, false, "udp:" + addr + ":" + std::to_string(ntohs(sa.sin_port)));
}

std::string HostListeners::Unix(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (fd < 0 || path.size() >= sizeof sa.sun_path) {
    if (fd >= 0) close(fd);
    error_ = "unix socket " + path;
    return "";
  }
  memcpy(sa.sun_path, path.data(), path.size());
  unlink(path.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(fd, 64) != 0) {
    error_ = "unix " + path + ": " + strerror(errno);
    close(fd);
    return "";
  }
  return Add(fd, true, "unix:" + path);
}

std::string HostListeners::Abstract(const std::string& name) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (fd < 0 || name.size() + 1 >= sizeof sa.sun_path) {
    if (fd >= 0) close(fd);
    error_ = "abstract socket " + name;
    return "";
  }
  memcpy(sa.sun_path + 1, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0 || listen(fd, 64) != 0) {
    error_ = "abstract " + name + ": " + strerror(errno);
    close(fd);
    return "";
  }
  return Add(fd, true, "abstract:" + name);
}

int HostListeners::Hits(const std::string& spec) const {
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (endpoints_[i].spec == spec) return hits_[i].load();
  }
  return -1;
}

int HostListeners::TotalHits() const {
  int total = 0;
  for (size_t i = 0; i < endpoints_.size(); ++i) total += hits_[i].load();
  return total;
}

void HostListeners::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void HostListeners::Loop() {
  for (;;) {
    std::vector<pollfd> pfds;
    for (const auto& e : endpoints_) pfds.push_back({e.fd.get(), POLLIN, 0});
    pfds.push_back({stop_r_.get(), POLLIN, 0});
    if (poll(pfds.data(), pfds.size(), -1) < 0 && errno != EINTR) return;
    if (pfds.back().revents != 0) return;
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      if (!(pfds[i].revents & POLLIN)) continue;
      if (endpoints_[i].stream) {
        int c = accept4(endpoints_[i].fd.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          ++hits_[i];
          close(c);
        }
      } else {
        char buf[2048];
        sockaddr_storage from{};
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(endpoints_[i].fd.get(), buf, sizeof buf, 0,
                             reinterpret_cast<sockaddr*>(&from), &flen);
        if (n >= 0) ++hits_[i];
      }
    }
  }
}

}  // namespace safex::containment
