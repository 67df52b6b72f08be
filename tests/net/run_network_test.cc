// Integration tests of drivers/net: real namespaces, real veths, real nftables, real traffic, all
// inside namespaces this test creates (see net_world.h). Needs root.
#include "drivers/net/run_network.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "drivers/net/address_pool.h"
#include "drivers/net/netns.h"
#include "drivers/net/nft.h"
#include "tests/net/net_world.h"
#include "tests/support/test_support.h"

extern char** environ;

namespace safex::drivers::net {
namespace {

using safex::testing::net::CommandResult;
using safex::testing::net::RunCommand;
using safex::testing::net::Servers;
using safex::testing::net::World;

constexpr char kHost1[] = "198.18.1.10";
constexpr char kHost2[] = "198.18.1.11";
constexpr char kMetadata[] = "169.254.169.254";
constexpr int kProbeTimeoutMs = 400;

ResolvedEgress Literal(const std::string& addr, uint16_t port,
                       plan::Protocol proto = plan::Protocol::kTcp) {
  ResolvedEgress e;
  e.rule.host = addr;
  e.rule.port = port;
  e.rule.protocol = proto;
  e.literal = true;
  e.addresses.push_back(*plan::IpAddress::Parse(addr));
  return e;
}

// "reached" (0), "blocked" (1), "refused" (2), error (3), from a separate process started inside
// the run's namespace: the stand-in for the sandbox until the gVisor driver's seam exists.
struct Probe {
  int code;
  std::string out;
};
Probe ProbeFrom(const std::string& netns_path, const std::string& proto, const std::string& addr,
                int port) {
  CommandResult r = RunCommand({SAFEX_NET_TEST_HELPER, "probe", netns_path, proto, addr,
                                std::to_string(port), std::to_string(kProbeTimeoutMs)});
  return {r.exit_code, r.out};
}

class RunNetworkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!safex::testing::IsRoot()) return;
    std::string error;
    world_ = World::Create(&error).release();
    if (!world_) {
      setup_error_ = new std::string(error);
      return;
    }
    servers_ = new Servers();
    // The outside world: test hosts on several ports, TCP and UDP, and the metadata address.
    servers_->Listen(world_->world_fd(), "tcp", kHost1, 8080);
    servers_->Listen(world_->world_fd(), "tcp", kHost1, 8081);
    servers_->Listen(world_->world_fd(), "udp", kHost1, 5353);
    servers_->Listen(world_->world_fd(), "udp", kHost1, 53);
    servers_->Listen(world_->world_fd(), "udp", kHost1, 9999);
    servers_->Listen(world_->world_fd(), "tcp", kHost2, 8080);
    servers_->Listen(world_->world_fd(), "tcp", kMetadata, 80);
    // The uplink's own services: on all its addresses and on its loopback.
    servers_->Listen(world_->uplink_fd(), "tcp", "0.0.0.0", 7070);
    servers_->Listen(world_->uplink_fd(), "tcp", "127.0.0.1", 7071);
    // A loopback service of the machine's own namespace (port picked by the kernel).
    host_port_ = servers_->Listen(-1, "tcp", "127.0.0.1", 0);
    servers_->Start();
  }
  static void TearDownTestSuite() {
    // The shared uplink nft context's socket would keep the uplink namespace alive.
    CloseSharedNftContexts();
    delete servers_;
    servers_ = nullptr;
    delete world_;
    world_ = nullptr;
    if (state_dir_created_) {
      RunCommand({"rm", "-rf", StateDir()});
    }
  }

  void SetUp() override {
    SAFEX_REQUIRE_ROOT();
    ASSERT_EQ(setup_error_, nullptr) << *setup_error_;
    ASSERT_NE(world_, nullptr);
    state_dir_created_ = true;
  }

  static std::string StateDir() { return "/run/safex-test-net-" + std::to_string(::getpid()); }

  NetworkConfig Config() const {
    NetworkConfig cfg;
    cfg.uplink_netns = world_->uplink_path();
    cfg.state_dir = StateDir();
    cfg.pool_cidr = "198.18.128.0/24";
    cfg.manage_ip_forward = true;  // the uplink here is the test's own namespace
    return cfg;
  }
  std::string RunId(const std::string& what) const {
    return "t" + std::to_string(::getpid()) + "-" + what;
  }
  static int Hits(const std::string& key) { return servers_->Hits(key); }

  static World* world_;
  static Servers* servers_;
  static std::string* setup_error_;
  static int host_port_;
  static bool state_dir_created_;
};
World* RunNetworkTest::world_ = nullptr;
Servers* RunNetworkTest::servers_ = nullptr;
std::string* RunNetworkTest::setup_error_ = nullptr;
int RunNetworkTest::host_port_ = 0;
bool RunNetworkTest::state_dir_created_ = false;

TEST_F(RunNetworkTest, GrantedFlowsWorkAndEverythingElseIsBlockedAndCounted) {
  auto net =
      RunNetwork::Create(Config(), RunId("grant"),
                         {Literal(kHost1, 8080), Literal(kHost1, 5353, plan::Protocol::kUdp)});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  const std::string ns = net->netns_path();
  ASSERT_EQ(net->DeniedCount(), 0u);

  Probe p = ProbeFrom(ns, "tcp", kHost1, 8080);
  EXPECT_EQ(p.code, 0) << p.out;
  EXPECT_EQ(Hits("tcp 198.18.1.10:8080"), 1);
  p = ProbeFrom(ns, "udp", kHost1, 5353);
  EXPECT_EQ(p.code, 0) << p.out;
  EXPECT_EQ(Hits("udp 198.18.1.10:5353"), 1);

  struct Denied {
    const char* proto;
    std::string addr;
    int port;
    std::string key;  // the listener that must never see it
  };
  const SandboxLink& link = net->sandbox_link();
  const std::vector<Denied> denied = {
      {"tcp", kHost1, 8081, "tcp 198.18.1.10:8081"},     // another port, same host
      {"tcp", kHost2, 8080, "tcp 198.18.1.11:8080"},     // another host
      {"tcp", kMetadata, 80, "tcp 169.254.169.254:80"},  // metadata (something answers there)
      {"udp", kHost1, 53, "udp 198.18.1.10:53"},         // DNS does not leave
      {"udp", kHost1, 9999, "udp 198.18.1.10:9999"},     // UDP to a non-granted port
      {"tcp", link.GatewayString(), 7070, "tcp 0.0.0.0:7070"},  // the uplink host via the gateway
      {"tcp", "198.18.0.1", 7070, "tcp 0.0.0.0:7070"},          // the uplink host's other address
  };
  uint64_t before = net->DeniedCount();
  for (const Denied& d : denied) {
    p = ProbeFrom(ns, d.proto, d.addr, d.port);
    EXPECT_NE(p.code, 0) << d.proto << " " << d.addr << ":" << d.port << " was reached";
    EXPECT_NE(p.code, 3) << p.out;
    EXPECT_EQ(Hits(d.key), 0) << d.key << " saw traffic from the sandbox";
  }
  // Loopback services of the uplink and of the machine's own namespace: 127.0.0.1 inside the run
  // is the run's own loopback, where nothing listens.
  p = ProbeFrom(ns, "tcp", "127.0.0.1", 7071);
  EXPECT_NE(p.code, 0) << p.out;
  EXPECT_EQ(Hits("tcp 127.0.0.1:7071"), 0);
  p = ProbeFrom(ns, "tcp", "127.0.0.1", host_port_);
  EXPECT_NE(p.code, 0) << p.out;
  EXPECT_EQ(Hits("tcp 127.0.0.1:" + std::to_string(host_port_)), 0);

  auto counts = net->ReadDenied();
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_GE(counts->Egress() - before, denied.size())
      << "every denied attempt is counted: run_output=" << counts->run_output
      << " uplink_forward=" << counts->uplink_forward << " uplink_host=" << counts->uplink_host;

  ASSERT_TRUE(net->Teardown().ok());
  // The final counters survive teardown (the audit event reads them after the run).
  EXPECT_EQ(net->DeniedCount(), counts->Egress());
  EXPECT_FALSE(::access(ns.c_str(), F_OK) == 0) << "netns pin remains";
}

TEST_F(RunNetworkTest, UplinkRulesHoldEvenIfTheRunNamespaceRulesAreGone) {
  // A sandbox that escaped into its namespace could flush the rules there; the uplink table is
  // out of its reach and must enforce the same policy alone.
  auto net = RunNetwork::Create(Config(), RunId("flush"), {Literal(kHost1, 8080)});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  auto del = NftRun(net->netns_fd(), std::string("delete table inet ") + kRunTable);
  ASSERT_TRUE(del.ok()) << del.status().ToString();
  const std::string ns = net->netns_path();
  const int granted_before = Hits("tcp 198.18.1.10:8080");

  EXPECT_EQ(ProbeFrom(ns, "tcp", kHost1, 8080).code, 0);
  EXPECT_EQ(Hits("tcp 198.18.1.10:8080"), granted_before + 1);
  EXPECT_NE(ProbeFrom(ns, "tcp", kHost1, 8081).code, 0);
  EXPECT_NE(ProbeFrom(ns, "tcp", kHost2, 8080).code, 0);
  EXPECT_NE(ProbeFrom(ns, "tcp", kMetadata, 80).code, 0);
  EXPECT_NE(ProbeFrom(ns, "udp", kHost1, 53).code, 0);
  EXPECT_NE(ProbeFrom(ns, "tcp", net->sandbox_link().GatewayString(), 7070).code, 0);
  EXPECT_EQ(Hits("tcp 198.18.1.10:8081"), 0);
  EXPECT_EQ(Hits("tcp 198.18.1.11:8080"), 0);
  EXPECT_EQ(Hits("tcp 169.254.169.254:80"), 0);
  EXPECT_EQ(Hits("udp 198.18.1.10:53"), 0);
  EXPECT_EQ(Hits("tcp 0.0.0.0:7070"), 0);

  auto counts = net->ReadDenied();
  // The run namespace's counters went with its table; only the uplink ones remain readable.
  if (!counts.ok()) {
    auto up = NftRun(world_->uplink_fd(), "list counters table inet " + net->nft_table());
    ASSERT_TRUE(up.ok()) << up.status().ToString();
    auto c = ParseCounterPackets(*up);
    EXPECT_GE(c[kDeniedForward], 4u);
    EXPECT_GE(c[kDeniedHost], 1u);
  }
  ASSERT_TRUE(net->Teardown().ok());
}

TEST_F(RunNetworkTest, ConcurrentRunsCannotReachEachOther) {
  auto a = RunNetwork::Create(Config(), RunId("a"), {Literal(kHost1, 8080)});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = RunNetwork::Create(Config(), RunId("b"), {Literal(kHost1, 8080)});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_NE(a->sandbox_link().address, b->sandbox_link().address);
  EXPECT_NE(a->host_veth(), b->host_veth());

  // A service inside run B, on all of B's addresses.
  Servers in_b;
  ASSERT_EQ(in_b.Listen(b->netns_fd(), "tcp", "0.0.0.0", 6060), 6060);
  in_b.Start();
  for (const std::string& target :
       {b->sandbox_link().AddressString(), b->sandbox_link().GatewayString()}) {
    Probe p = ProbeFrom(a->netns_path(), "tcp", target, 6060);
    EXPECT_NE(p.code, 0) << "run A reached run B at " << target;
  }
  EXPECT_EQ(in_b.Hits("tcp 0.0.0.0:6060"), 0);
  // Both still reach their granted destination.
  EXPECT_EQ(ProbeFrom(a->netns_path(), "tcp", kHost1, 8080).code, 0);
  EXPECT_EQ(ProbeFrom(b->netns_path(), "tcp", kHost1, 8080).code, 0);

  // A policy naming another run's address is refused outright.
  auto c =
      RunNetwork::Create(Config(), RunId("c"), {Literal(b->sandbox_link().AddressString(), 6060)});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("address pool"), std::string::npos) << c.status().ToString();
}

TEST_F(RunNetworkTest, NeverReachableAddressesAreRefusedAndLeaveNothing) {
  const auto netns_before = safex::testing::net::NetnsEntries(RunId(""));
  for (const char* addr : {"169.254.169.254", "127.0.0.1", "224.0.0.1", "0.0.0.0"}) {
    auto net = RunNetwork::Create(Config(), RunId("never"), {Literal(addr, 80)});
    ASSERT_FALSE(net.ok()) << addr;
    EXPECT_EQ(net.status().code(), Status::Code::kPermissionDenied) << net.status().ToString();
    EXPECT_NE(net.status().message().find(addr), std::string::npos) << net.status().ToString();
  }
  EXPECT_EQ(safex::testing::net::NetnsEntries(RunId("")), netns_before);
}

TEST_F(RunNetworkTest, NamesReachTheSandboxThroughItsHostsFile) {
  Resolver fake = [](const std::string& host) -> Result<std::vector<plan::IpAddress>> {
    if (host == "granted.example")
      return std::vector<plan::IpAddress>{*plan::IpAddress::Parse(kHost1)};
    return Status::NotFound("no such name");
  };
  plan::EgressRule rule{"granted.example", 8080, plan::Protocol::kTcp};
  auto resolved = ResolveEgress({rule}, plan::Ceilings{}, fake);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  auto net = RunNetwork::Create(Config(), RunId("names"), *resolved);
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  EXPECT_NE(net->hosts_file().find("198.18.1.10\tgranted.example\n"), std::string::npos)
      << net->hosts_file();
  EXPECT_NE(net->hosts_file().find("127.0.0.1\tlocalhost"), std::string::npos);
  EXPECT_EQ(ProbeFrom(net->netns_path(), "tcp", kHost1, 8080).code, 0);
}

TEST_F(RunNetworkTest, ForwardingIsChangedOnlyInTheUplinkNamespace) {
  auto host_before = ReadProcSys("/proc/sys/net/ipv4/ip_forward");
  ASSERT_TRUE(host_before.ok());
  auto net = RunNetwork::Create(Config(), RunId("fwd"), {Literal(kHost1, 8080)});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  std::string uplink_value;
  ASSERT_TRUE(RunInNetns(world_->uplink_fd(), [&]() -> Status {
                auto v = ReadProcSys("/proc/sys/net/ipv4/ip_forward");
                if (v.ok()) uplink_value = *v;
                return v.status();
              }).ok());
  EXPECT_EQ(uplink_value, "1");
  EXPECT_EQ(*ReadProcSys("/proc/sys/net/ipv4/ip_forward"), *host_before);

  // With management off and forwarding off, a run is refused with a clear message.
  ASSERT_TRUE(net->Teardown().ok());
  ASSERT_TRUE(RunInNetns(world_->uplink_fd(), [] {
                return WriteProcSys("/proc/sys/net/ipv4/ip_forward", "0");
              }).ok());
  NetworkConfig strict = Config();
  strict.manage_ip_forward = false;
  auto refused = RunNetwork::Create(strict, RunId("fwd2"), {Literal(kHost1, 8080)});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("ip_forward"), std::string::npos);
}

TEST_F(RunNetworkTest, HundredRunsLeaveNothingBehind) {
  CloseSharedNftContexts();
  const auto netns_before = safex::testing::net::NetnsEntries(RunId(""));
  const auto links_before = safex::testing::net::LinkNames(world_->uplink_name());
  const std::string tables_before = safex::testing::net::NftTables(world_->uplink_name());
  const int fds_before = safex::testing::net::OpenFdCount();
  const auto mounts_before = safex::testing::net::Mounts(RunId(""));
  for (int i = 0; i < 100; ++i) {
    auto net =
        RunNetwork::Create(Config(), RunId("cycle" + std::to_string(i)), {Literal(kHost1, 8080)});
    ASSERT_TRUE(net.ok()) << "cycle " << i << ": " << net.status().ToString();
    if (i % 25 == 0) {
      EXPECT_EQ(ProbeFrom(net->netns_path(), "tcp", kHost1, 8080).code, 0);
    }
    ASSERT_TRUE(net->Teardown().ok()) << "cycle " << i;
  }
  CloseSharedNftContexts();
  EXPECT_EQ(safex::testing::net::NetnsEntries(RunId("")), netns_before);
  EXPECT_EQ(safex::testing::net::LinkNames(world_->uplink_name()), links_before);
  EXPECT_EQ(safex::testing::net::NftTables(world_->uplink_name()), tables_before);
  EXPECT_EQ(safex::testing::net::OpenFdCount(), fds_before);
  EXPECT_EQ(safex::testing::net::Mounts(RunId("")), mounts_before);
  auto pool = AddressPool::Open(Config().pool_cidr, Config().state_dir, Config().max_slots);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(*pool->CountRecords(), 0);
}

TEST_F(RunNetworkTest, BackgroundTeardownsLeaveNothingOnceWaitedFor) {
  CloseSharedNftContexts();
  const auto netns_before = safex::testing::net::NetnsEntries(RunId(""));
  const auto links_before = safex::testing::net::LinkNames(world_->uplink_name());
  const std::string tables_before = safex::testing::net::NftTables(world_->uplink_name());
  const int fds_before = safex::testing::net::OpenFdCount();
  std::vector<uint32_t> addresses;
  for (int i = 0; i < 20; ++i) {
    auto net =
        RunNetwork::Create(Config(), RunId("bg" + std::to_string(i)), {Literal(kHost1, 8080)});
    ASSERT_TRUE(net.ok()) << "run " << i << ": " << net.status().ToString();
    addresses.push_back(net->sandbox_link().address);
    EXPECT_NE(ProbeFrom(net->netns_path(), "udp", kHost1, 53).code, 0);
    net->TeardownInBackground();
    // The counters were read before returning.
    EXPECT_GE(net->DeniedCount(), 1u);
  }
  ASSERT_TRUE(WaitForBackgroundTeardowns().ok());
  CloseSharedNftContexts();
  EXPECT_EQ(safex::testing::net::NetnsEntries(RunId("")), netns_before);
  EXPECT_EQ(safex::testing::net::LinkNames(world_->uplink_name()), links_before);
  EXPECT_EQ(safex::testing::net::NftTables(world_->uplink_name()), tables_before);
  EXPECT_EQ(safex::testing::net::OpenFdCount(), fds_before);
  auto pool = AddressPool::Open(Config().pool_cidr, Config().state_dir, Config().max_slots);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(*pool->CountRecords(), 0);
}

TEST_F(RunNetworkTest, CrashedOwnerIsCleanedByCleanupStale) {
  const NetworkConfig cfg = Config();
  const std::string run_id = RunId("crash");
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::vector<std::string> args = {
      SAFEX_NET_TEST_HELPER,        "hold", cfg.uplink_netns, cfg.state_dir, cfg.pool_cidr, run_id,
      std::string(kHost1) + ":8080"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  std::string line;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  ASSERT_EQ(line.rfind("ready ", 0), 0u) << line;
  const std::string pin = cfg.netns_dir + "/" + NetnsPinName(run_id);
  const std::string veth = HostVethName(run_id);
  const std::string table = UplinkTableName(run_id);
  auto links = [&] { return safex::testing::net::LinkNames(world_->uplink_name()); };
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  ASSERT_TRUE(has(links(), veth));

  // A live holder is never cleaned.
  int cleaned = -1;
  ASSERT_TRUE(CleanupStale(cfg, &cleaned).ok());
  EXPECT_EQ(cleaned, 0);
  EXPECT_TRUE(has(links(), veth));

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  // The crash leaves everything behind...
  EXPECT_EQ(::access(pin.c_str(), F_OK), 0);
  EXPECT_TRUE(has(links(), veth));
  EXPECT_NE(safex::testing::net::NftTables(world_->uplink_name()).find(table), std::string::npos);
  // ...and the reconciler removes all of it.
  ASSERT_TRUE(CleanupStale(cfg, &cleaned).ok());
  EXPECT_EQ(cleaned, 1);
  EXPECT_NE(::access(pin.c_str(), F_OK), 0);
  EXPECT_FALSE(has(links(), veth));
  EXPECT_EQ(safex::testing::net::NftTables(world_->uplink_name()).find(table), std::string::npos);
  auto pool = AddressPool::Open(cfg.pool_cidr, cfg.state_dir, cfg.max_slots);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(*pool->CountRecords(), 0);
}

TEST_F(RunNetworkTest, TwoProcessesGetDifferentAddresses) {
  const NetworkConfig cfg = Config();
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::vector<std::string> args = {SAFEX_NET_TEST_HELPER,
                                   "hold",
                                   cfg.uplink_netns,
                                   cfg.state_dir,
                                   cfg.pool_cidr,
                                   RunId("other-proc"),
                                   std::string(kHost1) + ":8080"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  std::string line;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  auto mine = RunNetwork::Create(cfg, RunId("this-proc"), {Literal(kHost1, 8080)});
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  int cleaned = 0;
  EXPECT_TRUE(CleanupStale(cfg, &cleaned).ok());
  ASSERT_EQ(line.rfind("ready ", 0), 0u) << line;
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  const std::string other_addr = line.substr(line.rfind(' ') + 1);
  EXPECT_NE(other_addr, mine->sandbox_link().AddressString());
  EXPECT_EQ(cleaned, 1);
}

}  // namespace
}  // namespace safex::drivers::net
