// `safex run` with egress, end to end: the host config's network section, name/address checks at
// run start, a per-run namespace with nftables rules, runsc --network=host inside it, denied
// attempts counted into the audit log. The "outside world" is the network tests' World: test hosts
// at 198.18.1.10/.11 and 169.254.169.254 in a namespace this test creates, reached through an
// uplink namespace it also creates; no traffic touches the machine's real network.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>

#include "audit/audit_log.h"
#include "tests/net/net_world.h"
#include "tests/support/leak_check.h"
#include "tests/support/run_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_host_config.h"
#include "tests/support/test_support.h"

namespace safex {
namespace {

using ::testing::HasSubstr;
using testing::net::Servers;
using testing::net::World;

constexpr char kProbe[] = R"(import json, socket
res = {}
for host, port in [('198.18.1.10', 8080), ('198.18.1.10', 8081), ('198.18.1.11', 8080),
                   ('169.254.169.254', 80), ('10.0.0.1', 53)]:
    s = socket.socket()
    s.settimeout(1.5)
    try:
        s.connect((host, port))
        res['%s:%d' % (host, port)] = s.recv(16).decode().strip()
    except Exception as e:
        res['%s:%d' % (host, port)] = type(e).__name__
    finally:
        s.close()
print(json.dumps(res, sort_keys=True))
)";

class EgressCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SAFEX_REQUIRE_ROOT();
    SAFEX_REQUIRE(access("/usr/local/bin/runsc", X_OK) == 0, "runsc (scripts/install-deps.sh)");
    std::string error;
    world_ = World::Create(&error);
    ASSERT_NE(world_, nullptr) << error;
    servers_.Listen(world_->world_fd(), "tcp", "198.18.1.10", 8080);
    servers_.Listen(world_->world_fd(), "tcp", "198.18.1.10", 8081);
    servers_.Listen(world_->world_fd(), "tcp", "198.18.1.11", 8080);
    servers_.Listen(world_->world_fd(), "tcp", "169.254.169.254", 80);
    servers_.Start();
    host_config_ = dir_.Write("host.policy", std::string("host {\n") + testing::kTestBackends +
                                                 "  network {\n    pool = \"198.18.130.0/24\"\n"
                                                 "    uplink = \"" +
                                                 world_->uplink_path() + "\"\n  }\n}\n");
    before_ = testing::LeakSnapshot::Take();
  }
  void TearDown() override {
    if (world_ == nullptr) return;
    SAFEX_EXPECT_NO_LEAKS(before_);
  }

  testing::ProcessOutput Run(const std::string& policy_text, const std::vector<std::string>& argv) {
    std::string policy = dir_.Write("egress.policy", policy_text);
    std::vector<std::string> args = {"run",
                                     "--policy",
                                     policy,
                                     "--search-path",
                                     testing::SourceDir() + "/policies/examples",
                                     "--host-config",
                                     host_config_,
                                     "--audit-db",
                                     dir_.Join("audit.db"),
                                     "--audit-key",
                                     dir_.Join("audit.key"),
                                     "--json",
                                     "--"};
    args.insert(args.end(), argv.begin(), argv.end());
    return testing::RunSafex(args);
  }

  testing::TempDir dir_;
  std::unique_ptr<World> world_;
  Servers servers_;
  std::string host_config_;
  testing::LeakSnapshot before_;
};

constexpr char kGranted[] = R"(policy "egress-test" extends "python-untrusted" {
  network {
    default = deny
    @override("test fixture: one test host in a namespace the test made")
    egress "198.18.1.10:8080"
  }
}
)";

TEST_F(EgressCliTest, OnlyTheGrantedHostPortIsReachable) {
  testing::ProcessOutput r = Run(kGranted, {"python3", "-c", kProbe});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  nlohmann::json seen = nlohmann::json::parse(j["stdout"]["text"].get<std::string>());
  EXPECT_EQ(seen["198.18.1.10:8080"], "ok") << seen.dump();
  EXPECT_NE(seen["198.18.1.10:8081"], "ok");
  EXPECT_NE(seen["198.18.1.11:8080"], "ok");
  EXPECT_NE(seen["169.254.169.254:80"], "ok");
  EXPECT_NE(seen["10.0.0.1:53"], "ok");
  // Nothing but the granted flow arrived at the outside world.
  EXPECT_EQ(servers_.Hits("tcp 198.18.1.10:8080"), 1);
  EXPECT_EQ(servers_.Hits("tcp 198.18.1.10:8081"), 0);
  EXPECT_EQ(servers_.Hits("tcp 198.18.1.11:8080"), 0);
  EXPECT_EQ(servers_.Hits("tcp 169.254.169.254:80"), 0);
  EXPECT_THAT(j["backend_mode"].get<std::string>(), HasSubstr("network=netns"));
  // Denied attempts are counted and recorded.
  EXPECT_GT(j["denied_egress"].get<uint64_t>(), 0u);
  audit::AuditOptions o;
  o.read_only = true;
  auto log = audit::AuditLog::Open(dir_.Join("audit.db"), o);
  ASSERT_TRUE(log.ok());
  auto run = (*log)->GetRun(j["run_id"].get<std::string>());
  ASSERT_TRUE(run.ok());
  ASSERT_FALSE(run->run.denied_egress.empty());
  EXPECT_GT(run->run.denied_egress.front().count, 0u);
  // The evidence: what the kernel showed of the run's namespace before the program started, in
  // the report and in the end event alike.
  std::map<std::string, nlohmann::json> fields;
  for (const auto& f : j["enforcement"]["fields"]) fields[f["name"].get<std::string>()] = f;
  EXPECT_EQ(fields["network.egress_accepts"]["state"], "matches") << j["enforcement"].dump();
  EXPECT_EQ(fields["network.egress_accepts"]["observed"], "198.18.1.10:8080/tcp");
  EXPECT_EQ(fields["network.chain_policies"]["observed"], "drop, drop");
  EXPECT_EQ(fields["network.addresses"]["state"], "matches");
  EXPECT_THAT(fields["network.addresses"]["observed"].get<std::string>(),
              HasSubstr("lo 127.0.0.1/8"));
  EXPECT_EQ(fields["network.ruleset_sha256"]["observed"].get<std::string>().size(), 64u);
  EXPECT_EQ(nlohmann::json::parse(run->run.enforcement), j["enforcement"]);
}

// The native backend (trusted code on the host kernel) gets the same per-run namespace and rules.
TEST_F(EgressCliTest, OnNativeOnlyTheGrantedHostPortIsReachableToo) {
  testing::ProcessOutput r = Run(R"(policy "egress-native" {
  trust = trusted
  isolation = native
  limits {
    wall_time = 30s
    cpu_time = 10s
    memory = 256MiB
    pids = 32
    open_files = 256
    output = 1MiB
    disk = 16MiB
    cpus = 1
  }
  rootfs host_readonly ["/usr", "/lib", "/lib64", "/bin"]
  mount tmpfs at "/tmp" { size = 16MiB }
  network {
    default = deny
    egress "198.18.1.10:8080"
  }
  env { set PATH = "/usr/bin:/bin" }
}
)",
                                 {"python3", "-c", kProbe});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  nlohmann::json seen = nlohmann::json::parse(j["stdout"]["text"].get<std::string>());
  EXPECT_EQ(seen["198.18.1.10:8080"], "ok") << seen.dump();
  for (const char* denied :
       {"198.18.1.10:8081", "198.18.1.11:8080", "169.254.169.254:80", "10.0.0.1:53"}) {
    EXPECT_NE(seen[denied], "ok") << denied;
  }
  EXPECT_EQ(servers_.Hits("tcp 198.18.1.10:8080"), 1);
  EXPECT_EQ(servers_.Hits("tcp 198.18.1.10:8081"), 0);
  EXPECT_EQ(servers_.Hits("tcp 169.254.169.254:80"), 0);
  EXPECT_THAT(j["backend_mode"].get<std::string>(), HasSubstr("native/"));
  EXPECT_THAT(j["backend_mode"].get<std::string>(), HasSubstr("network=netns"));
  EXPECT_GT(j["denied_egress"].get<uint64_t>(), 0u);
}

TEST_F(EgressCliTest, NoEgressMeansNoNetworkAtAll) {
  testing::ProcessOutput r =
      Run("policy \"no-egress\" extends \"python-untrusted\" {\n}\n", {"python3", "-c", kProbe});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  nlohmann::json seen = nlohmann::json::parse(j["stdout"]["text"].get<std::string>());
  for (auto& [k, v] : seen.items()) EXPECT_NE(v, "ok") << k;
  EXPECT_EQ(servers_.Hits("tcp 198.18.1.10:8080"), 0);
  EXPECT_THAT(j["backend_mode"].get<std::string>(), HasSubstr("network=none"));
  // No namespace to read back: said so, with the probe that tests it instead.
  bool said = false;
  for (const auto& f : j["enforcement"]["fields"]) {
    if (f["name"] != "network") continue;
    said = true;
    EXPECT_EQ(f["state"], "not-observed");
    EXPECT_THAT(f["probe"].get<std::string>(), HasSubstr("metadata"));
  }
  EXPECT_TRUE(said) << j["enforcement"].dump();
}

TEST_F(EgressCliTest, ForbiddenLiteralAddressFailsToCompile) {
  testing::ProcessOutput r = Run(R"(policy "meta" extends "python-untrusted" {
  network {
    default = deny
    egress "169.254.169.254:80"
  }
}
)",
                                 {"python3", "-c", "print(1)"});
  EXPECT_EQ(r.status, 125);
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "refused");
  EXPECT_THAT(j["diagnostics"].get<std::string>(), HasSubstr("error[E0"));
  EXPECT_EQ(servers_.Hits("tcp 169.254.169.254:80"), 0);
}

}  // namespace
}  // namespace safex
