#include "plan/plan_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "tests/plan/valid_plan.h"

namespace safex::plan {
namespace {

using testing::ValidPlan;

TEST(PlanJsonTest, CanonicalFormIsSortedCompactAndComplete) {
  std::string j = ToCanonicalJson(ValidPlan());
  EXPECT_EQ(j.find(' '), std::string::npos);
  EXPECT_EQ(j.find('\n'), std::string::npos);
  EXPECT_EQ(j.rfind("{\"backend\":\"gvisor\",", 0), 0u) << j.substr(0, 40);
  // Every key is present, including optional values as null.
  auto v = nlohmann::json::parse(j);
  EXPECT_TRUE(v["validators"][0]["json"].is_null());
  EXPECT_EQ(v["validators"][1]["json"]["max_depth"], 64);
  EXPECT_EQ(v["limits"]["memory_bytes"], 512u << 20);
  EXPECT_EQ(v["mounts"][0]["kind"], "bind");
  EXPECT_EQ(v["seccomp"]["rules"][1]["action"], "kill");
  // Re-dumping nlohmann's (sorted) object reproduces the bytes.
  EXPECT_EQ(v.dump(), j);
}

TEST(PlanJsonTest, EqualPlansGiveIdenticalBytesAndDigest) {
  EXPECT_EQ(ToCanonicalJson(ValidPlan()), ToCanonicalJson(ValidPlan()));
  EXPECT_EQ(PlanDigest(ValidPlan()), Sha256Hex(ToCanonicalJson(ValidPlan())));
  Plan other = ValidPlan();
  other.limits.pids = 65;
  EXPECT_NE(PlanDigest(other), PlanDigest(ValidPlan()));
}

TEST(PlanJsonTest, RoundTrip) {
  Plan p = ValidPlan();
  p.env["UNICODE"] = "h\xc3\xa9llo \"quoted\" \\ \n\t\x01";
  p.overrides.push_back({"limits.memory_bytes", "SEC-1: needs it", "a.policy:4:3"});
  p.microvm.kvm = KvmMode::kNever;
  std::string j = ToCanonicalJson(p);
  auto back = PlanFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToCanonicalJson(*back), j);
  EXPECT_EQ(back->env.at("UNICODE"), p.env.at("UNICODE"));
}

TEST(PlanJsonTest, SessionLimitsRoundTripAndAreAbsentWhenNotAllowed) {
  Plan p = ValidPlan();
  EXPECT_EQ(ToCanonicalJson(p).find("\"session\""), std::string::npos);
  p.session = {true, 20, 120'000'000'000ull, 3600'000'000'000ull};
  const std::string j = ToCanonicalJson(p);
  EXPECT_NE(
      j.find(
          R"("session":{"idle_timeout_ns":120000000000,"max_execs":20,"max_lifetime_ns":3600000000000})"),
      std::string::npos)
      << j;
  auto back = PlanFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->session.allowed);
  EXPECT_EQ(back->session.max_execs, 20u);
  EXPECT_EQ(back->session.idle_timeout_ns, p.session.idle_timeout_ns);
  EXPECT_EQ(back->session.max_lifetime_ns, p.session.max_lifetime_ns);
  EXPECT_NE(PlanDigest(*back), PlanDigest(ValidPlan()));
}

TEST(PlanJsonTest, ContainerImagesRoundTripAndAreAbsentWhenEmpty) {
  Plan p = ValidPlan();
  EXPECT_EQ(ToCanonicalJson(p).find("\"container\""), std::string::npos);
  p.container.images = {"docker.io/library/python:3.12", "registry.example.com/agents/*"};
  auto back = PlanFromJson(ToCanonicalJson(p));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->container.images, p.container.images);
  EXPECT_TRUE(ImageAllowed(back->container, "registry.example.com/agents/x:1"));
  EXPECT_FALSE(ImageAllowed(back->container, "docker.io/library/python:3.13"));
  EXPECT_NE(PlanDigest(*back), PlanDigest(ValidPlan()));
}

TEST(PlanJsonTest, CallerChoicesRoundTripAndAreAbsentWhenEmpty) {
  Plan p = ValidPlan();
  const std::string without = ToCanonicalJson(p);
  EXPECT_EQ(without.find("\"caller\""), std::string::npos);  // digests of older plans stay
  p.caller.env = {"SEED", "TASK_ID"};
  p.caller.cwd = {"/data/in"};
  const std::string j = ToCanonicalJson(p);
  EXPECT_NE(j.find(R"("caller":{"cwd":["/data/in"],"env":["SEED","TASK_ID"]})"), std::string::npos)
      << j;
  auto back = PlanFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->caller.env, p.caller.env);
  EXPECT_EQ(back->caller.cwd, p.caller.cwd);
  EXPECT_NE(PlanDigest(*back), PlanDigest(ValidPlan()));
}

TEST(PlanJsonTest, DigestIsCheckedWhenPresent) {
  std::string with = ToCanonicalJsonWithDigest(ValidPlan());
  EXPECT_NE(with.find("\"plan_digest\":\"" + PlanDigest(ValidPlan()) + "\""), std::string::npos);
  ASSERT_TRUE(PlanFromJson(with).ok());
  auto v = nlohmann::json::parse(with);
  v["limits"]["pids"] = 4000;  // hand edit without updating the digest
  auto r = PlanFromJson(v.dump());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("plan_digest"), std::string::npos);
  v = nlohmann::json::parse(with);
  v["plan_digest"] = 7;
  EXPECT_FALSE(PlanFromJson(v.dump()).ok());
}

TEST(PlanJsonTest, WhitespaceAndKeyOrderAreFreeOnInput) {
  auto v = nlohmann::json::parse(ToCanonicalJson(ValidPlan()));
  auto r = PlanFromJson(v.dump(2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ToCanonicalJson(*r), ToCanonicalJson(ValidPlan()));
}

// Each mutation of a valid document must be refused, and the message must name the problem.
struct Bad {
  const char* name;
  std::string json;
  const char* expect;  // substring of the error
};

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) s.replace(pos, from.size(), to);
  return s;
}

TEST(PlanJsonTest, StrictReaderRefusesMalformedDocuments) {
  const std::string good = ToCanonicalJson(ValidPlan());
  const std::vector<Bad> cases = {
      {"empty", "", "byte"},
      {"not object", "[]", "not an object"},
      {"trailing", good + "x", "byte"},
      {"second doc", good + "{}", "byte"},
      {"unknown top", Replace(good, "{\"backend\"", "{\"extra\":1,\"backend\""), "extra"},
      {"unknown nested", Replace(good, "\"cpus\":1", "\"cpus\":1,\"gpus\":1"), "limits.gpus"},
      {"missing", Replace(good, "\"trust\":\"untrusted\",", ""), "trust is missing"},
      {"missing nested", Replace(good, "\"pids\":64,", ""), "limits.pids is missing"},
      {"duplicate", Replace(good, "\"cpus\":1", "\"cpus\":1,\"cpus\":1"), "duplicate key"},
      {"duplicate nested deep",
       Replace(good, "\"PYTHONDONTWRITEBYTECODE\":\"1\"",
               "\"PYTHONDONTWRITEBYTECODE\":\"1\",\"PYTHONDONTWRITEBYTECODE\":\"0\""),
       "duplicate key"},
      {"byte order mark", "\xEF\xBB\xBF" + good, "byte order mark"},
      {"wrong type", Replace(good, "\"pids\":64", "\"pids\":\"64\""),
       "limits.pids is not an integer"},
      {"bool type", Replace(good, "\"utf8\":true", "\"utf8\":1"), "not a boolean"},
      {"float", Replace(good, "\"pids\":64", "\"pids\":64.0"), "not an integer"},
      {"negative", Replace(good, "\"pids\":64", "\"pids\":-1"), "negative"},
      {"too big", Replace(good, "\"pids\":64", "\"pids\":18446744073709551616"), "not an integer"},
      {"u32 range", Replace(good, "\"cpus\":1", "\"cpus\":4294967296"), "out of range"},
      {"port range", Replace(good, "\"port\":443", "\"port\":65536"), "out of range"},
      {"enum", Replace(good, "\"backend\":\"gvisor\"", "\"backend\":\"docker\""), "unknown value"},
      {"enum case", Replace(good, "\"trust\":\"untrusted\"", "\"trust\":\"Untrusted\""),
       "unknown value"},
      {"null limits", Replace(good, "\"process\":{", "\"process\":null,\"x\":{"), "process"},
      {"invalid utf8", Replace(good, "\"unit\"", "\"un\xff\""), "byte"},
      {"lone surrogate", Replace(good, "\"unit\"", "\"\\ud800\""), "byte"},
      {"env non-string",
       Replace(good, "\"PYTHONDONTWRITEBYTECODE\":\"1\"", "\"PYTHONDONTWRITEBYTECODE\":1"),
       "env.PYTHONDONTWRITEBYTECODE"},
      {"deep", std::string(100, '[') + std::string(100, ']'), "nesting"},
      {"nan", Replace(good, "\"pids\":64", "\"pids\":NaN"), "byte"},
      {"comment", "/*x*/" + good, "byte"},
  };
  for (const auto& c : cases) {
    auto r = PlanFromJson(c.json);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.name << ": " << r.status().message();
  }
}

TEST(PlanJsonTest, InvalidUtf8InAPlanDoesNotThrowOnOutput) {
  Plan p = ValidPlan();
  p.env["BAD"] = "\xff\xfe";
  std::string j = ToCanonicalJson(p);
  EXPECT_NE(j.find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD
}

TEST(PlanJsonTest, EnumNamesRoundTrip) {
  for (auto a :
       {SyscallAction::kAllow, SyscallAction::kErrno, SyscallAction::kKill, SyscallAction::kLog}) {
    EXPECT_EQ(SyscallActionFromName(SyscallActionName(a)), a);
  }
  for (auto k : {MountKind::kBind, MountKind::kTmpfs, MountKind::kInput, MountKind::kOutput}) {
    EXPECT_EQ(MountKindFromName(MountKindName(k)), k);
  }
  EXPECT_FALSE(BackendFromName("GVISOR"));
}

}  // namespace
}  // namespace safex::plan
