#include "tests/net/net_world.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "drivers/net/netlink.h"
#include "drivers/net/netns.h"

extern char** environ;

namespace safex::testing::net {

CommandResult RunCommand(const std::vector<std::string>& argv) {
  CommandResult r;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return r;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_adddup2(&fa, p[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  if (rc != 0) {
    ::close(p[0]);
    r.out = std::string("spawn failed: ") + std::strerror(rc);
    return r;
  }
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof(buf))) > 0) r.out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

Servers::Servers() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) == 0) {
    stop_r_.Reset(p[0]);
    stop_w_.Reset(p[1]);
  }
}

Servers::~Servers() {
  if (thread_.joinable()) {
    (void)!::write(stop_w_.get(), "x", 1);
    thread_.join();
  }
}

int Servers::Listen(int netns_fd, const std::string& proto, const std::string& addr, int port) {
  const bool tcp = proto == "tcp";
  UniqueFd fd;
  int bound = -1;
  Status st = drivers::net::RunInNetns(netns_fd, [&]() -> Status {
    fd.Reset(::socket(AF_INET, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0));
    if (!fd) return Status::Errno("socket", errno);
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      return Status::Errno("bind", addr + ":" + std::to_string(port), errno);
    }
    if (tcp && ::listen(fd.get(), 64) != 0) return Status::Errno("listen", errno);
    socklen_t len = sizeof(sa);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    bound = ntohs(sa.sin_port);
    return Status::Ok();
  });
  if (!st.ok()) return -1;
  endpoints_.push_back({proto + " " + addr + ":" + std::to_string(bound), tcp, std::move(fd)});
  return bound;
}

void Servers::Start() {
  hits_ = std::make_unique<std::atomic<int>[]>(endpoints_.size());
  for (size_t i = 0; i < endpoints_.size(); ++i) hits_[i] = 0;
  thread_ = std::thread([this] { Loop(); });
}

int Servers::Hits(const std::string& key) const {
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (endpoints_[i].key == key) return hits_[i].load();
  }
  return -1;
}

void Servers::Loop() {
  std::vector<pollfd> fds;
  for (const auto& e : endpoints_) fds.push_back({e.fd.get(), POLLIN, 0});
  fds.push_back({stop_r_.get(), POLLIN, 0});
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) continue;
    if (fds.back().revents) return;
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      if (!fds[i].revents) continue;
      if (endpoints_[i].tcp) {
        int c = ::accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          ++hits_[i];
          (void)!::write(c, "ok\n", 3);
          ::close(c);
        }
      } else {
        char buf[512];
        struct sockaddr_in from = {};
        socklen_t len = sizeof(from);
        ssize_t n =
            ::recvfrom(fds[i].fd, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
        if (n >= 0) {
          ++hits_[i];
          ::sendto(fds[i].fd, "ok", 2, 0, reinterpret_cast<sockaddr*>(&from), len);
        }
      }
    }
  }
}

namespace {

bool Ip(const std::vector<std::string>& args, std::string* error) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = RunCommand(argv);
  if (r.exit_code != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    *error = cmd + "failed: " + r.out;
    return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<World> World::Create(std::string* error) {
  auto w = std::unique_ptr<World>(new World());
  const std::string id = std::to_string(::getpid());
  w->uplink_ = "sxt-u-" + id;
  w->world_ = "sxt-w-" + id;
  w->link_ = "sxtw" + id;
  const std::string& U = w->uplink_;
  const std::string& W = w->world_;
  const std::vector<std::vector<std::string>> steps = {
      {"netns", "add", U},
      {"netns", "add", W},
      {"link", "add", w->link_, "netns", U, "type", "veth", "peer", "name", "eth0", "netns", W},
      {"-n", U, "link", "set", "lo", "up"},
      {"-n", U, "addr", "add", "198.18.0.1/24", "dev", w->link_},
      {"-n", U, "link", "set", w->link_, "up"},
      {"-n", W, "link", "set", "lo", "up"},
      {"-n", W, "addr", "add", "198.18.0.2/24", "dev", "eth0"},
      {"-n", W, "link", "set", "eth0", "up"},
      {"-n", W, "addr", "add", "198.18.1.10/32", "dev", "lo"},
      {"-n", W, "addr", "add", "198.18.1.11/32", "dev", "lo"},
      {"-n", W, "addr", "add", "169.254.169.254/32", "dev", "lo"},
      {"-n", W, "route", "add", "default", "via", "198.18.0.1"},
      {"-n", U, "route", "add", "198.18.1.0/24", "via", "198.18.0.2"},
      {"-n", U, "route", "add", "169.254.169.254/32", "via", "198.18.0.2"},
  };
  for (const auto& s : steps) {
    if (!Ip(s, error)) return nullptr;  // ~World removes what exists
  }
  w->world_fd_.Reset(::open(w->world_path().c_str(), O_RDONLY | O_CLOEXEC));
  w->uplink_fd_.Reset(::open(w->uplink_path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!w->world_fd_ || !w->uplink_fd_) {
    *error = "cannot open the test namespaces";
    return nullptr;
  }
  // Links come up asynchronously; until they are, the first packets (ARP included) are dropped.
  for (auto [fd, name] : {std::pair<int, std::string>{w->uplink_fd_.get(), w->link_},
                          std::pair<int, std::string>{w->world_fd_.get(), "eth0"}}) {
    auto sk = drivers::net::RtnlSocket::OpenIn(fd);
    auto idx = sk.ok() ? sk->LinkIndex(name) : Result<int>(sk.status());
    Status st = idx.ok() ? sk->WaitOperUp(*idx, 5000) : idx.status();
    if (!st.ok()) {
      *error = "test link " + name + ": " + st.ToString();
      return nullptr;
    }
  }
  return w;
}

World::~World() {
  world_fd_.Reset();
  uplink_fd_.Reset();
  std::string ignored;
  if (!world_.empty()) Ip({"netns", "del", world_}, &ignored);
  if (!uplink_.empty()) Ip({"netns", "del", uplink_}, &ignored);
}

std::vector<std::string> LinkNames(const std::string& netns_name) {
  CommandResult r = RunCommand({"ip", "-n", netns_name, "-o", "link", "show"});
  std::vector<std::string> names;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    // "3: name@if2: <...>"
    size_t a = line.find(": ");
    if (a == std::string::npos) continue;
    size_t b = line.find_first_of(":@", a + 2);
    names.push_back(line.substr(a + 2, b - a - 2));
  }
  return names;
}

std::string NftTables(const std::string& netns_name) {
  return RunCommand({"ip", "netns", "exec", netns_name, "nft", "list", "tables"}).out;
}

std::vector<std::string> NetnsEntries(const std::string& contains) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/run/netns")) {
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != ".." && n.find(contains) != std::string::npos) out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int OpenFdCount() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n;
}

std::vector<std::string> Mounts(const std::string& contains) {
  std::ifstream in("/proc/self/mountinfo");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(contains) != std::string::npos) out.push_back(line);
  }
  return out;
}

}  // namespace safex::testing::net
