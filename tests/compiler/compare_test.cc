#include "compiler/compare.h"

#include <gtest/gtest.h>

#include "compiler/explain.h"
#include "tests/plan/valid_plan.h"

namespace safex::compiler {
namespace {

using plan::testing::ValidPlan;

std::vector<std::string> Effects(const std::vector<Change>& changes) {
  std::vector<std::string> out;
  for (const auto& c : changes) out.push_back(std::string(EffectName(c.effect)) + " " + c.field);
  return out;
}

TEST(ComparePlansTest, EqualPlansHaveNoChanges) {
  EXPECT_TRUE(ComparePlans(ValidPlan(), ValidPlan()).empty());
}

TEST(ComparePlansTest, DirectionOfEachChange) {
  plan::Plan a = ValidPlan();
  plan::Plan b = ValidPlan();
  b.limits.memory_bytes *= 2;
  b.limits.pids /= 2;
  b.trust = plan::Trust::kTrusted;
  b.backend = plan::Backend::kMicrovm;
  b.mounts[1].size_bytes /= 2;
  b.mounts.erase(b.mounts.begin() + 2);  // the input mount
  b.network.egress.push_back({"example.com", 443, plan::Protocol::kTcp});
  b.seccomp.rules[0].action = plan::SyscallAction::kAllow;  // bpf: errno -> allow
  b.seccomp.rules[1].action = plan::SyscallAction::kErrno;  // ptrace: kill -> errno
  b.validators[0].utf8 = false;
  b.validators[1].json->max_depth = 8;
  b.env["NEW"] = "1";
  b.process.uid = 0;
  auto changes = ComparePlans(a, b);
  EXPECT_EQ(Effects(changes),
            (std::vector<std::string>{
                "loosens trust", "tightens backend", "loosens limits.memory_bytes",
                "tightens limits.pids", "loosens process.uid", "tightens mounts[1].size_bytes",
                "tightens mounts[2]", "loosens network.egress[1]", "changes env.NEW",
                "loosens seccomp.rules[0]", "loosens seccomp.rules[1]",
                "loosens validators[0].utf8", "tightens validators[1].json.max_depth"}));
  for (const auto& c : changes) {
    if (c.effect == Change::Effect::kLoosens) {
      EXPECT_FALSE(c.code.empty()) << c.field;
    }
  }
  std::string text = DescribeChanges(changes);
  EXPECT_EQ(text.rfind("LOOSENS", 0), 0u) << text;  // loosening first
  EXPECT_NE(text.find("memory raised from 512MiB to 1GiB"), std::string::npos) << text;
}

TEST(ComparePlansTest, WhatCallersMayChoose) {
  plan::Plan a = ValidPlan();
  a.caller.env = {"SEED"};
  a.caller.cwd = {"/data/in"};
  plan::Plan b = a;
  b.caller.env = {"EXTRA", "SEED"};
  b.caller.cwd = {};
  auto changes = ComparePlans(a, b);
  EXPECT_EQ(Effects(changes),
            (std::vector<std::string>{"loosens caller.env", "tightens caller.cwd"}));
  EXPECT_EQ(changes[0].code, "E056");
}

TEST(ComparePlansTest, SessionsAllowedOrLongerLoosen) {
  plan::Plan a = ValidPlan();
  plan::Plan b = a;
  b.session = {true, 10, 60'000'000'000ull, 600'000'000'000ull};
  auto changes = ComparePlans(a, b);
  EXPECT_EQ(Effects(changes), (std::vector<std::string>{"loosens session"}));
  EXPECT_EQ(changes[0].code, "E096");
  plan::Plan c = b;
  c.session.max_execs = 20;
  c.session.max_lifetime_ns = 300'000'000'000ull;
  EXPECT_EQ(
      Effects(ComparePlans(b, c)),
      (std::vector<std::string>{"loosens session.max_execs", "tightens session.max_lifetime_ns"}));
  EXPECT_EQ(Effects(ComparePlans(b, a)), (std::vector<std::string>{"tightens session"}));
}

TEST(ComparePlansTest, RemovingAValidatorLoosens) {
  plan::Plan a = ValidPlan();
  plan::Plan b = ValidPlan();
  b.validators.pop_back();
  auto c = ComparePlans(a, b);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].effect, Change::Effect::kLoosens);
  EXPECT_EQ(c[0].code, "E052");
  c = ComparePlans(b, a);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].effect, Change::Effect::kTightens);
}

TEST(ComparePlansTest, SyscallDefaultStrictness) {
  plan::Plan a = ValidPlan();
  plan::Plan b = ValidPlan();
  b.seccomp.default_action = plan::SyscallAction::kErrno;
  auto c = ComparePlans(a, b);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].effect, Change::Effect::kTightens);
  c = ComparePlans(b, a);
  EXPECT_EQ(c[0].effect, Change::Effect::kLoosens);
  EXPECT_EQ(c[0].code, "E050");
}

}  // namespace
}  // namespace safex::compiler
