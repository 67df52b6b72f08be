// Unit tests of drivers/net that need no privileges: resolution policy with an injected resolver,
// the rulesets' text, names, the address pool's cross-owner allocation (flock on a temp dir),
// records and counter parsing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>

#include "drivers/net/address_pool.h"
#include "drivers/net/nft.h"
#include "drivers/net/resolve.h"
#include "drivers/net/run_network.h"

namespace safex::drivers::net {
namespace {

plan::IpAddress Ip(const char* s) { return *plan::IpAddress::Parse(s); }

Resolver Fake(std::map<std::string, std::vector<const char*>> answers, int* calls = nullptr) {
  return [answers, calls](const std::string& host) -> Result<std::vector<plan::IpAddress>> {
    if (calls) ++*calls;
    auto it = answers.find(host);
    if (it == answers.end()) return Status::NotFound("no such name: " + host);
    std::vector<plan::IpAddress> out;
    for (const char* a : it->second) out.push_back(Ip(a));
    return out;
  };
}

plan::EgressRule Rule(const std::string& host, uint16_t port,
                      plan::Protocol p = plan::Protocol::kTcp) {
  return plan::EgressRule{host, port, p};
}

TEST(ResolveEgressTest, PublicAnswersAreKeptDeduplicated) {
  auto r = ResolveEgress(
      {Rule("pypi.example", 443)}, plan::Ceilings{},
      Fake({{"pypi.example",
             {"151.101.0.223", "151.101.64.223", "151.101.0.223", "2a04:4e42::223"}}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_FALSE((*r)[0].literal);
  EXPECT_EQ((*r)[0].addresses.size(), 3u);
}

TEST(ResolveEgressTest, LiteralsAreNotResolved) {
  int calls = 0;
  auto r = ResolveEgress({Rule("198.18.1.10", 8080)}, plan::Ceilings{}, Fake({}, &calls));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE((*r)[0].literal);
  EXPECT_EQ((*r)[0].addresses[0], Ip("198.18.1.10"));
}

// Each forbidden class, reached through a name, refuses the run and the message names the host,
// the address and the class.
TEST(ResolveEgressTest, AnyForbiddenAnswerRefusesTheRun) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"127.0.0.1", "loopback"}, {"::1", "loopback"},        {"169.254.169.254", ""},
      {"fd00:ec2::254", ""},     {"169.254.10.1", ""},       {"fe80::1", ""},
      {"10.1.2.3", "private"},   {"192.168.1.1", "private"}, {"172.16.0.1", "private"},
      {"100.64.0.1", ""},        {"224.0.0.251", ""},        {"ff02::1", ""},
  };
  for (const auto& [addr, cls] : cases) {
    auto r = ResolveEgress({Rule("api.example", 443)}, plan::Ceilings{},
                           Fake({{"api.example", {"93.184.216.34", addr}}}));
    ASSERT_FALSE(r.ok()) << addr;
    EXPECT_EQ(r.status().code(), Status::Code::kPermissionDenied) << addr;
    const std::string& m = r.status().message();
    EXPECT_NE(m.find("api.example"), std::string::npos) << m;
    EXPECT_NE(m.find(Ip(addr).ToString()), std::string::npos) << m;
    EXPECT_NE(m.find(plan::AddressClassName(plan::Classify(Ip(addr)))), std::string::npos) << m;
    if (*cls) {
      EXPECT_NE(m.find(cls), std::string::npos) << m;
    }
  }
}

TEST(ResolveEgressTest, ForbiddenLiteralsAreRefused) {
  for (const char* addr : {"169.254.169.254", "127.0.0.1", "10.0.0.1", "fd00:ec2::254"}) {
    auto r = ResolveEgress({Rule(addr, 80)}, plan::Ceilings{}, Fake({}));
    ASSERT_FALSE(r.ok()) << addr;
    EXPECT_NE(r.status().message().find(addr), std::string::npos) << r.status().message();
  }
}

TEST(ResolveEgressTest, OperatorRangesAdmitPrivateButNeverMetadataOrLoopback) {
  plan::Ceilings c;
  c.allowed_egress_ranges = {"10.0.0.0/8", "169.254.0.0/16", "127.0.0.0/8"};
  EXPECT_TRUE(
      ResolveEgress({Rule("db.internal", 5432)}, c, Fake({{"db.internal", {"10.2.3.4"}}})).ok());
  EXPECT_FALSE(
      ResolveEgress({Rule("meta.internal", 80)}, c, Fake({{"meta.internal", {"169.254.169.254"}}}))
          .ok());
  EXPECT_FALSE(
      ResolveEgress({Rule("lo.internal", 80)}, c, Fake({{"lo.internal", {"127.0.0.1"}}})).ok());
}

TEST(ResolveEgressTest, UnresolvableAndMalformedHostsAreRefused) {
  auto r = ResolveEgress({Rule("nowhere.example", 443)}, plan::Ceilings{}, Fake({}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nowhere.example"), std::string::npos);
  for (const char* bad : {"a b", "evil\n1.2.3.4 x", "-a.example", "a..b", "", "x:y", "1.2.3.04"}) {
    auto b = ResolveEgress({Rule(bad, 443)}, plan::Ceilings{}, Fake({}));
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), Status::Code::kInvalidArgument) << bad;
  }
  auto empty =
      ResolveEgress({Rule("empty.example", 443)}, plan::Ceilings{}, Fake({{"empty.example", {}}}));
  EXPECT_FALSE(empty.ok());
  EXPECT_FALSE(ResolveEgress({Rule("x.example", 0)}, plan::Ceilings{}, Fake({})).ok());
}

TEST(HostNameTest, Validation) {
  EXPECT_TRUE(IsValidHostName("pypi.org"));
  EXPECT_TRUE(IsValidHostName("a-b.c1.example"));
  EXPECT_TRUE(IsValidHostName("localhost"));
  EXPECT_FALSE(IsValidHostName("1.2.3.4"));  // an address is never a name
  EXPECT_FALSE(IsValidHostName(std::string(64, 'a') + ".example"));
  EXPECT_FALSE(IsValidHostName("a_b.example"));
  EXPECT_FALSE(IsValidHostName("a-.example"));
}

TEST(NamesTest, FitKernelLimitsAndAreStable) {
  const std::string id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  EXPECT_TRUE(IsValidRunId(id));
  EXPECT_LT(HostVethName(id).size(), static_cast<size_t>(IFNAMSIZ));
  EXPECT_EQ(HostVethName(id), HostVethName(id));
  EXPECT_NE(HostVethName(id), HostVethName(id + "x"));
  EXPECT_EQ(UplinkTableName(id).rfind("safex_", 0), 0u);
  EXPECT_EQ(NetnsPinName("r1"), "safex-r1");
  EXPECT_FALSE(IsValidRunId(""));
  EXPECT_FALSE(IsValidRunId("../x"));
  EXPECT_FALSE(IsValidRunId("A"));
  EXPECT_FALSE(IsValidRunId(id + "0"));
}

TEST(RulesetTest, RunNamespaceDropsByDefaultAndAllowsOnlyTheFlows) {
  std::vector<EgressFlow> flows = {{0xC612010A, 8080, plan::Protocol::kTcp},
                                   {0xC612010A, 5353, plan::Protocol::kUdp}};
  std::string r = RunNamespaceRuleset(flows, "198.18.128.0/17");
  EXPECT_NE(r.find("type filter hook output priority filter; policy drop;"), std::string::npos);
  EXPECT_NE(r.find("ip daddr 198.18.1.10 tcp dport 8080 accept"), std::string::npos);
  EXPECT_NE(r.find("ip daddr 198.18.1.10 udp dport 5353 accept"), std::string::npos);
  EXPECT_NE(r.find("169.254.0.0/16"), std::string::npos);
  EXPECT_NE(r.find("198.18.128.0/17"), std::string::npos);
  // The never-reachable drop comes before any accept.
  EXPECT_LT(r.find("@never_v4"), r.find("tcp dport 8080 accept"));
  EXPECT_NE(r.find("counter name \"denied_egress\" drop\n  }"), std::string::npos);
}

TEST(RulesetTest, UplinkForwardsOnlyThisRunsFlowsAndMasqueradesThem) {
  std::vector<EgressFlow> flows = {{0xC612010A, 8080, plan::Protocol::kTcp}};
  std::string r = UplinkRuleset("safex_abc", "sxabc", 0xC6128002, flows, "198.18.128.0/17");
  EXPECT_NE(r.find("iifname \"sxabc\" ip saddr 198.18.128.2 ip daddr 198.18.1.10 tcp dport 8080 "
                   "accept"),
            std::string::npos);
  EXPECT_NE(r.find("iifname \"sxabc\" counter name \"denied_forward\" drop"), std::string::npos);
  EXPECT_NE(r.find("type filter hook input priority filter; policy accept;\n"
                   "    iifname \"sxabc\" counter name \"denied_host\" drop"),
            std::string::npos);
  EXPECT_NE(r.find("oifname \"sxabc\" ct state established,related accept"), std::string::npos);
  EXPECT_NE(r.find("ip saddr 198.18.128.2 oifname != \"sxabc\" masquerade"), std::string::npos);
}

TEST(CounterParseTest, ReadsPacketsPerCounter) {
  const char* text =
      "table inet safex {\n\tcounter denied_egress {\n\t\tpackets 7 bytes 420\n\t}\n"
      "\tcounter denied_ingress {\n\t\tpackets 0 bytes 0\n\t}\n}\n";
  auto c = ParseCounterPackets(text);
  EXPECT_EQ(c["denied_egress"], 7u);
  EXPECT_EQ(c["denied_ingress"], 0u);
  EXPECT_EQ(c.count("other"), 0u);
}

TEST(SlotRecordTest, RoundTripAndTruncation) {
  SlotRecord r{"run-1", 42, "/run/netns/safex-run-1", "/run/netns/up", "sxabc", "safex_abc"};
  std::string text = r.Serialize();
  SlotRecord back;
  ASSERT_TRUE(SlotRecord::Parse(text, &back));
  EXPECT_EQ(back.run_id, "run-1");
  EXPECT_EQ(back.pid, 42);
  EXPECT_EQ(back.uplink_netns, "/run/netns/up");
  EXPECT_EQ(back.nft_table, "safex_abc");
  EXPECT_FALSE(SlotRecord::Parse(text.substr(0, text.size() - 5), &back));
  EXPECT_FALSE(SlotRecord::Parse("garbage", &back));
}

class AddressPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/safex-pool-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir_;
};

SlotRecord Rec(const std::string& id) { return SlotRecord{id, 1, "", "", "", ""}; }
Status NoStale(const SlotRecord& r) {
  return Status::Internal("unexpected stale record " + r.run_id);
}

TEST_F(AddressPoolTest, SlotsAreDistinctAndReusedAfterClear) {
  auto pool = AddressPool::Open("198.18.128.0/28", dir_ + "/state", 8192);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ(pool->slot_count(), 4u);
  std::vector<SlotLease> leases;
  std::set<uint32_t> subnets;
  for (int i = 0; i < 4; ++i) {
    auto l = pool->Acquire(Rec("r" + std::to_string(i)), NoStale);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ(l->gateway(), l->subnet() + 1);
    EXPECT_EQ(l->sandbox(), l->subnet() + 2);
    EXPECT_TRUE(pool->Contains(l->sandbox()));
    subnets.insert(l->subnet());
    leases.push_back(std::move(*l));
  }
  EXPECT_EQ(subnets.size(), 4u);
  auto full = pool->Acquire(Rec("r4"), NoStale);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(*pool->CountRecords(), 4);
  const uint32_t freed = leases[2].subnet();
  ASSERT_TRUE(leases[2].Clear().ok());
  auto again = pool->Acquire(Rec("r5"), NoStale);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->subnet(), freed);
}

// Regression (two instances handed out the same egress address): leases are host-wide and named by
// address, so pools that differ but overlap (another instance's config, a changed config) meet on
// the same file for the same /30 and never both hold it.
TEST_F(AddressPoolTest, OverlappingPoolsNeverLeaseTheSameAddressTwice) {
  auto wide = AddressPool::Open("198.18.128.0/28", dir_ + "/state", 8192);    // .0 .4 .8 .12
  auto narrow = AddressPool::Open("198.18.128.8/29", dir_ + "/state", 8192);  // .8 .12
  ASSERT_TRUE(wide.ok() && narrow.ok());
  std::vector<SlotLease> held;
  std::set<uint32_t> subnets;
  for (int i = 0; i < 2; ++i) {
    auto l = narrow->Acquire(Rec("n" + std::to_string(i)), NoStale);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    subnets.insert(l->subnet());
    held.push_back(std::move(*l));
  }
  for (int i = 0; i < 2; ++i) {
    auto l = wide->Acquire(Rec("w" + std::to_string(i)), NoStale);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_TRUE(subnets.insert(l->subnet()).second)
        << Ipv4ToString(l->subnet()) << " was leased twice";
    held.push_back(std::move(*l));
  }
  auto full = wide->Acquire(Rec("w2"), NoStale);
  EXPECT_EQ(full.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(subnets.size(), 4u);
}

// flock is per open file description: two owners in one process exclude each other exactly as
// two processes do.
TEST_F(AddressPoolTest, ConcurrentOwnersNeverShareASlot) {
  auto pool = AddressPool::Open("198.18.128.0/26", dir_ + "/state", 8192);
  ASSERT_TRUE(pool.ok());
  std::vector<SlotLease> leases(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      auto l = pool->Acquire(Rec("t" + std::to_string(i)), NoStale);
      if (l.ok()) leases[i] = std::move(*l);
    });
  }
  for (auto& t : threads) t.join();
  std::set<uint32_t> subnets;
  for (auto& l : leases) {
    EXPECT_TRUE(l.held());
    subnets.insert(l.subnet());
  }
  EXPECT_EQ(subnets.size(), 16u);
}

TEST_F(AddressPoolTest, StaleRecordsAreCleanedBeforeReuseAndKeptWhenCleaningFails) {
  auto pool = AddressPool::Open("198.18.128.0/29", dir_ + "/state", 8192);
  ASSERT_TRUE(pool.ok());
  {
    // An owner that "died" without clearing: dropping the lease unlocks but keeps the record.
    auto a = pool->Acquire(Rec("dead-a"), NoStale);
    auto b = pool->Acquire(Rec("dead-b"), NoStale);
    ASSERT_TRUE(a.ok() && b.ok());
  }
  EXPECT_EQ(*pool->CountRecords(), 2);
  std::vector<std::string> seen;
  auto failing = [&seen](const SlotRecord& r) -> Status {
    seen.push_back(r.run_id);
    return r.run_id == "dead-a" ? Status::Unavailable("cannot remove") : Status::Ok();
  };
  // Slot 0 (dead-a) cannot be cleaned: skipped, never reused. Slot 1 is cleaned and reused.
  auto l = pool->Acquire(Rec("new"), failing);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->index(), 1u);
  EXPECT_EQ(seen, (std::vector<std::string>{"dead-a", "dead-b"}));
  int cleaned = -1;
  EXPECT_FALSE(pool->CleanStale(failing, &cleaned).ok());
  EXPECT_EQ(cleaned, 0);
  EXPECT_TRUE(pool->CleanStale([](const SlotRecord&) { return Status::Ok(); }, &cleaned).ok());
  EXPECT_EQ(cleaned, 1);
  EXPECT_EQ(*pool->CountRecords(), 1);  // only the live "new"
}

TEST(AddressPoolOpenTest, RejectsBadPools) {
  for (const char* bad :
       {"198.18.128.1/17", "2001:db8::/64", "198.18.128.0/31", "10.0.0.0/7", "nonsense"}) {
    EXPECT_FALSE(AddressPool::Open(bad, "/tmp/unused-safex-pool", 8192).ok()) << bad;
  }
  NetworkConfig cfg;
  EXPECT_TRUE(ValidateNetworkConfig(cfg).ok());
  cfg.uplink_netns = "relative/path";
  EXPECT_FALSE(ValidateNetworkConfig(cfg).ok());
}

}  // namespace
}  // namespace safex::drivers::net
