// End to end: real runsc started by GvisorDriver inside a RunNetwork's namespace with
// --network=host, against the tests' own outside world (net_world.h). Needs root and runsc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "drivers/gvisor/gvisor_driver.h"
#include "drivers/net/address_pool.h"
#include "drivers/net/nft.h"
#include "drivers/net/run_network.h"
#include "tests/drivers/test_plans.h"
#include "tests/net/net_world.h"
#include "tests/support/leak_check.h"
#include "tests/support/test_support.h"

namespace safex::drivers {
namespace {

using safex::testing::net::Servers;
using safex::testing::net::World;

constexpr char kRunsc[] = "/usr/local/bin/runsc";
constexpr char kClient[] = "/opt/safex-net-test/sandbox_connect";

// Names the tests' resolver knows; nothing reaches a real DNS server.
Result<std::vector<plan::IpAddress>> FakeResolve(const std::string& host) {
  static const std::map<std::string, const char*> kNames = {{"granted.test", "198.18.1.10"},
                                                            {"other.test", "198.18.1.11"}};
  auto it = kNames.find(host);
  if (it == kNames.end()) return Status::NotFound("no such test name: " + host);
  return std::vector<plan::IpAddress>{*plan::IpAddress::Parse(it->second)};
}

// "arg result ..." lines of sandbox_connect -> arg -> result word.
std::map<std::string, std::string> ParseClient(const std::string& out) {
  std::map<std::string, std::string> r;
  std::istringstream in(out);
  std::string arg, result, rest;
  while (in >> arg >> result) {
    std::getline(in, rest);
    r[arg] = result;
  }
  return r;
}

class GvisorNetworkTest : public safex::testing::LeakCheckedTest {
 protected:
  static void SetUpTestSuite() {
    if (!safex::testing::IsRoot() || ::access(kRunsc, X_OK) != 0) return;
    std::string error;
    world_ = World::Create(&error).release();
    if (!world_) {
      error_ = new std::string(error);
      return;
    }
    servers_ = new Servers();
    servers_->Listen(world_->world_fd(), "tcp", "198.18.1.10", 8080);
    servers_->Listen(world_->world_fd(), "tcp", "198.18.1.10", 8081);
    servers_->Listen(world_->world_fd(), "tcp", "198.18.1.11", 8080);
    servers_->Listen(world_->world_fd(), "udp", "198.18.1.10", 53);
    servers_->Listen(world_->world_fd(), "tcp", "169.254.169.254", 80);
    servers_->Listen(world_->uplink_fd(), "tcp", "0.0.0.0", 7070);
    servers_->Start();
    // The state directory exists before the first leak snapshot and goes in TearDownTestSuite.
    (void)net::AddressPool::Open("198.18.129.0/24", StateDir(), 8192);
  }
  static void TearDownTestSuite() {
    net::CloseSharedNftContexts();
    delete servers_;
    servers_ = nullptr;
    delete world_;
    world_ = nullptr;
    std::error_code ec;
    std::filesystem::remove_all(StateDir(), ec);
  }
  static std::string StateDir() { return "/run/safex-test-gvnet-" + std::to_string(::getpid()); }

  void SetUp() override {
    LeakCheckedTest::SetUp();
    SAFEX_REQUIRE_ROOT();
    SAFEX_REQUIRE(::access(kRunsc, X_OK) == 0, "runsc at /usr/local/bin/runsc");
    ASSERT_EQ(error_, nullptr) << *error_;
    ASSERT_NE(world_, nullptr);
    net::NetworkConfig cfg;
    cfg.uplink_netns = world_->uplink_path();
    cfg.state_dir = StateDir();
    cfg.pool_cidr = "198.18.129.0/24";
    GvisorOptions options;
    options.network_provider =
        [cfg](const plan::Plan& p,
              const std::string& run_id) -> Result<std::unique_ptr<net::RunNetwork>> {
      SAFEX_ASSIGN_OR_RETURN(auto resolved,
                             net::ResolveEgress(p.network.egress, plan::Ceilings{}, FakeResolve));
      SAFEX_ASSIGN_OR_RETURN(net::RunNetwork n, net::RunNetwork::Create(cfg, run_id, resolved));
      return std::make_unique<net::RunNetwork>(std::move(n));
    };
    driver_ = std::make_unique<GvisorDriver>(std::move(options));
    Status st = driver_->Probe();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void TearDown() override {
    driver_.reset();
    net::CloseSharedNftContexts();
    LeakCheckedTest::TearDown();
  }

  plan::Plan PlanWithClient() {
    plan::Plan p = testing::BasePlan();
    std::string dir = SAFEX_NET_SANDBOX_CONNECT;
    plan::Mount m = testing::BindRo(dir.substr(0, dir.rfind('/')));
    m.target = "/opt/safex-net-test";
    p.mounts.push_back(m);
    return p;
  }

  Result<RunResult> Run(const plan::Plan& p, std::vector<std::string> argv) {
    static int n = 0;
    RunRequest req;
    req.run_id = "gvnet" + std::to_string(::getpid()) + "-" + std::to_string(n++);
    req.argv = std::move(argv);
    return driver_->Run(p, req);
  }

  static World* world_;
  static Servers* servers_;
  static std::string* error_;
  std::unique_ptr<GvisorDriver> driver_;
};
World* GvisorNetworkTest::world_ = nullptr;
Servers* GvisorNetworkTest::servers_ = nullptr;
std::string* GvisorNetworkTest::error_ = nullptr;

TEST_F(GvisorNetworkTest, SandboxReachesTheGrantedHostPortOnly) {
  plan::Plan p = PlanWithClient();
  p.network.egress = {{"granted.test", 8080, plan::Protocol::kTcp}};
  const std::vector<std::string> denied = {
      "tcp:198.18.1.10:8081",    // another port of the granted host
      "tcp:198.18.1.11:8080",    // another host
      "tcp:169.254.169.254:80",  // metadata, although something answers there
      "udp:198.18.1.10:53",      // DNS does not leave
      "tcp:198.18.0.1:7070",     // the uplink host's own address
      "tcp:198.18.129.1:7070",   // the run's gateway (the uplink host)
      "tcp:127.0.0.1:7070",      // loopback: the sandbox's own, nothing of the host's
  };
  std::vector<std::string> argv = {kClient, "tcp:granted.test:8080", "resolve:other.test"};
  argv.insert(argv.end(), denied.begin(), denied.end());
  auto r = Run(p, argv);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_stream.data;
  EXPECT_EQ(r->teardown_error, "");
  auto lines = ParseClient(r->stdout_stream.data);
  EXPECT_EQ(lines["tcp:granted.test:8080"], "reached") << r->stdout_stream.data;
  EXPECT_EQ(lines["resolve:other.test"], "unresolved") << "no DNS inside the sandbox";
  for (const std::string& d : denied) {
    EXPECT_NE(lines[d], "reached") << d << "\n" << r->stdout_stream.data;
    EXPECT_FALSE(lines[d].empty()) << d << " not probed\n" << r->stdout_stream.data;
  }
  EXPECT_EQ(servers_->Hits("tcp 198.18.1.10:8080"), 1);
  for (const char* key : {"tcp 198.18.1.10:8081", "tcp 198.18.1.11:8080", "udp 198.18.1.10:53",
                          "tcp 169.254.169.254:80", "tcp 0.0.0.0:7070"}) {
    EXPECT_EQ(servers_->Hits(key), 0) << key;
  }
  EXPECT_GE(r->denied_egress, 6u) << "denied attempts are counted for the audit event";
  EXPECT_NE(r->backend_mode.find("network="), std::string::npos);
  EXPECT_EQ(r->backend_mode.find("network=none"), std::string::npos) << r->backend_mode;
}

// A pooled sandbox (the warm pool) gets its network when it is made: its address lease is held
// while it waits (it counts against the pool), and once handed over the program reaches what
// the plan grants and nothing else, as in a cold run; the run's end releases the lease.
TEST_F(GvisorNetworkTest, APooledSandboxHoldsItsLeaseWhileWaitingAndEnforcesTheSameEgress) {
  plan::Plan p = PlanWithClient();
  p.network.egress = {{"granted.test", 8080, plan::Protocol::kTcp}};
  auto pool = net::AddressPool::Open("198.18.129.0/24", StateDir(), 8192);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto leases = [&pool] {
    auto n = pool->CountRecords();
    return n.ok() ? *n : -1;
  };
  const int before = leases();
  const int hits = servers_->Hits("tcp 198.18.1.10:8080");
  PrepareRequest preq;
  preq.sandbox_id = "sbx-gvnet" + std::to_string(::getpid());
  auto sb = driver_->Prepare(p, preq);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  EXPECT_EQ(leases(), before + 1) << "a waiting sandbox holds its address";
  EXPECT_EQ(servers_->Hits("tcp 198.18.1.10:8080"), hits) << "nothing ran yet";
  RunRequest req;
  req.run_id = "gvnet" + std::to_string(::getpid()) + "-pooled";
  req.argv = {kClient, "tcp:granted.test:8080", "tcp:198.18.1.11:8080", "tcp:169.254.169.254:80"};
  auto r = driver_->RunPrepared(std::move(sb).value(), p, req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->teardown_error, "");
  auto lines = ParseClient(r->stdout_stream.data);
  EXPECT_EQ(lines["tcp:granted.test:8080"], "reached") << r->stdout_stream.data;
  EXPECT_NE(lines["tcp:198.18.1.11:8080"], "reached") << r->stdout_stream.data;
  EXPECT_NE(lines["tcp:169.254.169.254:80"], "reached") << r->stdout_stream.data;
  EXPECT_EQ(servers_->Hits("tcp 198.18.1.10:8080"), hits + 1);
  EXPECT_GE(r->denied_egress, 2u);
  EXPECT_EQ(leases(), before) << "the lease goes with the sandbox";
}

TEST_F(GvisorNetworkTest, NoEgressMeansNoNetworkAtAll) {
  const int before = servers_->Hits("tcp 198.18.1.10:8080");
  auto r = Run(PlanWithClient(), {kClient, "tcp:198.18.1.10:8080", "resolve:granted.test"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto lines = ParseClient(r->stdout_stream.data);
  EXPECT_NE(lines["tcp:198.18.1.10:8080"], "reached") << r->stdout_stream.data;
  EXPECT_EQ(lines["resolve:granted.test"], "unresolved");
  EXPECT_EQ(servers_->Hits("tcp 198.18.1.10:8080"), before);
  EXPECT_NE(r->backend_mode.find("network=none"), std::string::npos) << r->backend_mode;
  EXPECT_EQ(r->denied_egress, 0u);
}

TEST_F(GvisorNetworkTest, ForbiddenResolvedAddressRefusesTheRunBeforeAnythingStarts) {
  plan::Plan p = PlanWithClient();
  p.network.egress = {{"metadata.test", 80, plan::Protocol::kTcp}};
  GvisorOptions options;
  options.network_provider = [](const plan::Plan& pl,
                                const std::string&) -> Result<std::unique_ptr<net::RunNetwork>> {
    auto resolved = net::ResolveEgress(
        pl.network.egress, plan::Ceilings{},
        [](const std::string&) -> Result<std::vector<plan::IpAddress>> {
          return std::vector<plan::IpAddress>{*plan::IpAddress::Parse("169.254.169.254")};
        });
    if (!resolved.ok()) return resolved.status();
    return Status::Internal("unreachable: the resolution must refuse");
  };
  GvisorDriver driver(std::move(options));
  ASSERT_TRUE(driver.Probe().ok());
  RunRequest req;
  req.run_id = "gvnet" + std::to_string(::getpid()) + "-refused";
  req.argv = {kClient, "tcp:metadata.test:80"};
  auto r = driver.Run(p, req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kPermissionDenied) << r.status().ToString();
  EXPECT_NE(r.status().message().find("169.254.169.254"), std::string::npos);
  EXPECT_EQ(servers_->Hits("tcp 169.254.169.254:80"), 0);
}

}  // namespace
}  // namespace safex::drivers
