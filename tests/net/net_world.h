// The tests' "outside world": a namespace holding test hosts at 198.18.1.10 and 198.18.1.11 (and
// 169.254.169.254, so that the metadata block is proven against something that answers), joined
// to an uplink namespace the module under test uses. Nothing touches the machine's real network:
// every address is inside namespaces created here (198.18.0.0/15 and the metadata /32).
//
//   world ns (sxt-w-<pid>)             uplink ns (sxt-u-<pid>)              run ns (safex-<id>)
//   lo: 198.18.1.10, .1.11,            sxtw<pid>: 198.18.0.1/24  <-------   eth0 <-> sx<id>
//       169.254.169.254                routes 198.18.1.0/24, 169.254.169.254 via 198.18.0.2
//   eth0: 198.18.0.2/24, default via 198.18.0.1
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.h"

namespace safex::testing::net {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout + stderr
};
// Runs argv (no shell) and waits.
CommandResult RunCommand(const std::vector<std::string>& argv);

// TCP and UDP servers on sockets opened inside given namespaces. Every accepted connection gets
// "ok\n" and is closed; every datagram gets "ok". Hits are counted per endpoint.
class Servers {
 public:
  Servers();
  ~Servers();
  // Opens a listener inside netns_fd (-1: this process's namespace). port 0 picks one; returns
  // the port. Key for Hits(): "tcp 198.18.1.10:8080".
  int Listen(int netns_fd, const std::string& proto, const std::string& addr, int port);
  int Hits(const std::string& key) const;
  void Start();

 private:
  void Loop();
  struct Endpoint {
    std::string key;
    bool tcp;
    UniqueFd fd;
  };
  std::vector<Endpoint> endpoints_;
  std::unique_ptr<std::atomic<int>[]> hits_;
  UniqueFd stop_r_, stop_w_;
  std::thread thread_;
};

class World {
 public:
  // Creates the namespaces and links with `ip` (test set-up; the module itself never uses it).
  static std::unique_ptr<World> Create(std::string* error);
  ~World();  // removes both namespaces (and with them every link inside)

  std::string uplink_path() const { return "/run/netns/" + uplink_; }
  std::string world_path() const { return "/run/netns/" + world_; }
  const std::string& uplink_name() const { return uplink_; }
  int world_fd() const { return world_fd_.get(); }
  int uplink_fd() const { return uplink_fd_.get(); }

 private:
  std::string uplink_, world_, link_;
  UniqueFd world_fd_, uplink_fd_;
};

// Link names in a namespace (ip -o link), nft tables (nft list tables) there, entries of
// /run/netns and mounts (lines of /proc/self/mountinfo) whose text contains `contains`, and this
// process's open fds. The filters keep other work on a shared machine out of the comparison.
std::vector<std::string> LinkNames(const std::string& netns_name);
std::string NftTables(const std::string& netns_name);
std::vector<std::string> NetnsEntries(const std::string& contains = "");
int OpenFdCount();
std::vector<std::string> Mounts(const std::string& contains);

}  // namespace safex::testing::net
