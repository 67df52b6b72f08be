// Host-side endpoints the network probes try to reach: TCP and UDP on loopback, a unix socket
// path, an abstract unix socket, and (through ListenIn) sockets inside a network namespace the
// suite created. Every accepted connection or received datagram is counted: a probe that reached
// one would show up here even if it lied about it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.h"

namespace safex::containment {

class HostListeners {
 public:
  HostListeners();
  ~HostListeners();
  HostListeners(const HostListeners&) = delete;
  HostListeners& operator=(const HostListeners&) = delete;

  // Each returns the probe endpoint spec (tests/containment/probes/probe_net.h), e.g.
  // "tcp:127.0.0.1:41234", or "" on failure (with the reason in error()).
  std::string Tcp(const std::string& addr, int port = 0, int netns_fd = -1);
  std::string Udp(const std::string& addr, int port = 0, int netns_fd = -1);
  std::string Unix(const std::string& path);
  std::string Abstract(const std::string& name);

  // Connections accepted / datagrams received on `spec` so far.
  int Hits(const std::string& spec) const;
  int TotalHits() const;
  const std::string& error() const { return error_; }

  // Starts the accept/receive thread (after every endpoint is added).
  void Start();

 private:
  std::string Add(int fd, bool stream, const std::string& spec);
  void Loop();

  struct Endpoint {
    std::string spec;
    bool stream;
    UniqueFd fd;
  };
  std::vector<Endpoint> endpoints_;
  std::unique_ptr<std::atomic<int>[]> hits_;
  UniqueFd stop_r_, stop_w_;
  std::thread thread_;
  std::string error_;
};

}  // namespace safex::containment
