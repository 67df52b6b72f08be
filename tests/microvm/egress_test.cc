// Egress under microvm, end to end through `safex run`: the run's namespace and its nftables rules
// come from drivers/net exactly as for gVisor; the guest takes the run's address on its own eth0
// through a tap bridged to the namespace's veth (drivers/microvm/guest_tap.h). The "outside world"
// is the network tests' World: test hosts at 198.18.1.10/.11 and 169.254.169.254 in a namespace
// this test creates, reached through an uplink namespace it also creates; no traffic touches the
// machine's real network.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "common/unique_fd.h"
#include "tests/microvm/microvm_test_util.h"
#include "tests/net/net_world.h"
#include "tests/support/leak_check.h"
#include "tests/support/run_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_host_config.h"
#include "tests/support/test_support.h"

namespace safex::microvm::testing {
namespace {

using safex::testing::net::Servers;
using safex::testing::net::World;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr char kProbe[] = R"(import json, socket
res = {}
for host, port in [('198.18.1.10', 8080), ('198.18.1.10', 8081), ('198.18.1.11', 8080),
                   ('169.254.169.254', 80)]:
    s = socket.socket()
    # The granted host answers (generous under TCG on a loaded host: ARP, then the handshake);
    # the others are dropped, so each costs its timeout.
    s.settimeout(10.0 if port == 8080 and host == '198.18.1.10' else 1.0)
    try:
        s.connect((host, port))
        res['%s:%d' % (host, port)] = s.recv(16).decode().strip()
    except Exception as e:
        res['%s:%d' % (host, port)] = type(e).__name__
    finally:
        s.close()
print(json.dumps(res, sort_keys=True))
)";

class MicrovmEgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SAFEX_REQUIRE_MICROVM();
    std::string error;
    world_ = World::Create(&error);
    ASSERT_NE(world_, nullptr) << error;
    servers_.Listen(world_->world_fd(), "tcp", "198.18.1.10", 8080);
    servers_.Listen(world_->world_fd(), "tcp", "198.18.1.10", 8081);
    servers_.Listen(world_->world_fd(), "tcp", "198.18.1.11", 8080);
    servers_.Listen(world_->world_fd(), "tcp", "169.254.169.254", 80);
    servers_.Start();
    host_config_ =
        dir_.Write("host.policy", std::string("host {\n") + safex::testing::kTestBackends +
                                      "  network {\n    pool = \"198.18.132.0/24\"\n"
                                      "    uplink = \"" +
                                      world_->uplink_path() + "\"\n  }\n}\n");
    before_ = safex::testing::LeakSnapshot::Take();
  }
  void TearDown() override {
    if (world_ == nullptr) return;
    SAFEX_EXPECT_NO_LEAKS(before_);
  }

  nlohmann::json Run(const std::string& policy_text, const std::vector<std::string>& argv) {
    std::string policy = dir_.Write("egress.policy", policy_text);
    std::vector<std::string> args = {"run",
                                     "--policy",
                                     policy,
                                     "--search-path",
                                     safex::testing::SourceDir() + "/policies/examples",
                                     "--host-config",
                                     host_config_,
                                     "--audit-db",
                                     dir_.Join("audit.db"),
                                     "--audit-key",
                                     dir_.Join("audit.key"),
                                     "--json",
                                     "--"};
    args.insert(args.end(), argv.begin(), argv.end());
    // The /usr image may have to be built first (minutes on a large /usr).
    safex::testing::ProcessOutput r =
        safex::testing::RunSafex(args, "", std::chrono::seconds(1200));
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out << "\nstderr: " << r.err;
    if (j.is_discarded()) return nlohmann::json::object();
    if (j.contains("run_id") && j["run_id"].is_string()) {
      std::vector<std::string> left = safex::testing::ResourcesNamingRun(j["run_id"], {}, true);
      EXPECT_TRUE(left.empty()) << "left behind:\n" << safex::testing::JoinLines(left);
    }
    return j;
  }

  safex::testing::TempDir dir_;
  std::unique_ptr<World> world_;
  Servers servers_;
  std::string host_config_;
  safex::testing::LeakSnapshot before_;
};

TEST_F(MicrovmEgressTest, OnlyTheGrantedHostPortIsReachableFromTheGuest) {
  nlohmann::json j = Run(R"(policy "egress-microvm" extends "python-untrusted" {
  isolation = microvm
  network {
    default = deny
    @override("test fixture: one test host in a namespace the test made")
    egress "198.18.1.10:8080"
  }
}
)",
                         {"python3", "-c", kProbe});
  ASSERT_EQ(j.value("verdict", ""), "ok") << j.dump();
  EXPECT_THAT(j["backend_mode"].get<std::string>(), HasSubstr("microvm/"));
  EXPECT_THAT(j["backend_mode"].get<std::string>(), HasSubstr("network=netns"));
  nlohmann::json seen =
      nlohmann::json::parse(j["stdout"]["text"].get<std::string>(), nullptr, false);
  ASSERT_FALSE(seen.is_discarded()) << j.dump();
  EXPECT_EQ(seen["198.18.1.10:8080"], "ok") << seen.dump();
  EXPECT_NE(seen["198.18.1.10:8081"], "ok");
  EXPECT_NE(seen["198.18.1.11:8080"], "ok");
  EXPECT_NE(seen["169.254.169.254:80"], "ok");
  // Nothing but the granted flow reached the outside world.
  EXPECT_EQ(servers_.Hits("tcp 198.18.1.10:8080"), 1);
  EXPECT_EQ(servers_.Hits("tcp 198.18.1.10:8081"), 0);
  EXPECT_EQ(servers_.Hits("tcp 198.18.1.11:8080"), 0);
  EXPECT_EQ(servers_.Hits("tcp 169.254.169.254:80"), 0);
  // The guest's denied attempts were dropped and counted by the run's rules.
  EXPECT_GT(j["denied_egress"].get<uint64_t>(), 0u) << j.dump();
  // The evidence: the run's namespace as the kernel lists it back, QEMU's version, the guest
  // kernel the agent reported before the program started.
  std::map<std::string, nlohmann::json> fields;
  for (const auto& f : j["enforcement"]["fields"]) fields[f["name"].get<std::string>()] = f;
  EXPECT_EQ(fields["network.egress_accepts"]["state"], "matches") << j["enforcement"].dump();
  EXPECT_EQ(fields["network.egress_accepts"]["observed"], "198.18.1.10:8080/tcp");
  EXPECT_EQ(fields["network.chain_policies"]["observed"], "drop, drop");
  EXPECT_EQ(fields["network.addresses"]["state"], "matches");
  EXPECT_EQ(fields["cgroup.memory_bytes"]["state"], "matches");
  EXPECT_THAT(fields["runtime"]["observed"].get<std::string>(), HasSubstr("QEMU"));
  UniqueFd qemu(open(QemuPath().c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(qemu.valid());
  Result<std::string> qemu_sha256 = Sha256HexOfFd(qemu.get());
  ASSERT_TRUE(qemu_sha256.ok());
  EXPECT_EQ(fields["runtime.sha256"]["observed"], *qemu_sha256);  // the binary, as sha256sum says
  EXPECT_FALSE(fields["guest.kernel"]["observed"].get<std::string>().empty());
  EXPECT_EQ(fields["accelerator"]["state"], "matches") << fields["accelerator"].dump();
  EXPECT_THAT(fields["accelerator"]["observed"].get<std::string>(), AnyOf("kvm", "tcg"));
  // And what the workload itself saw just before its exec (the guest agent's kEvidence).
  for (const char* name :
       {"process.identity", "process.capabilities", "seccomp.mode", "rlimits", "mounts"}) {
    EXPECT_EQ(fields[name]["state"], "matches") << name << ": " << fields[name].dump();
    EXPECT_THAT(fields[name]["source"].get<std::string>(), HasSubstr("the workload inside the VM"));
  }
}

// A guest that attempts nothing is counted as attempting nothing: the guest kernel's own chatter
// (IPv6 router solicitations, DAD) must not reach the run's rules as denied egress.
TEST_F(MicrovmEgressTest, AGuestThatSendsNothingHasNoDeniedEgress) {
  nlohmann::json j = Run(R"(policy "egress-quiet-microvm" extends "base-untrusted" {
  isolation = microvm
  network {
    default = deny
    @override("test fixture: one test host in a namespace the test made")
    egress "198.18.1.10:8080"
  }
}
)",
                         {"/bin/sh", "-c", "sleep 3; ls /sys/class/net | tr '\\n' ' '"});
  ASSERT_EQ(j.value("verdict", ""), "ok") << j.dump();
  EXPECT_EQ(j["stdout"]["text"], "eth0 lo ") << j.dump();
  EXPECT_EQ(j["denied_egress"].get<uint64_t>(), 0u) << j.dump();
  EXPECT_EQ(servers_.Hits("tcp 198.18.1.10:8080"), 0);
}

TEST_F(MicrovmEgressTest, WithoutEgressTheGuestHasNoNetworkDevice) {
  nlohmann::json j = Run(R"(policy "no-egress-microvm" extends "base-untrusted" {
  isolation = microvm
}
)",
                         {"/bin/sh", "-c", "ls /sys/class/net | tr '\\n' ' '"});
  ASSERT_EQ(j.value("verdict", ""), "ok") << j.dump();
  EXPECT_EQ(j["stdout"]["text"], "lo ") << j.dump();
  EXPECT_THAT(j["backend_mode"].get<std::string>(), HasSubstr("network=none"));
  EXPECT_EQ(servers_.Hits("tcp 198.18.1.10:8080"), 0);
}

}  // namespace
}  // namespace safex::microvm::testing
