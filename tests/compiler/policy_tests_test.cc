// `test` blocks: lowering, their errors, inheritance through `extends` (E055), `safex diff`'s view
// of them, and explain. Unprivileged.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/compare.h"
#include "compiler/compiler.h"
#include "compiler/explain.h"
#include "plan/plan_json.h"
#include "tests/compiler/compiler_test_util.h"

namespace safex::compiler {
namespace {

using testing::CodesOnly;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Policy;
using testing::TempDir;

constexpr char kDenial[] = R"P(  test "no network" {
    run ["/bin/sh", "-c", "echo blocked"]
    expect {
      exit = 0
      stdout = /^blocked$/
      denied = true
    }
  }
)P";

constexpr char kSuccess[] = R"P(  test "it runs" {
    run ["/bin/true"]
    expect { exit = 0 }
  }
)P";

CompileResult Compile(const std::string& path) { return CompileFile(path, CompileOptions{}); }

TEST(PolicyTestsTest, ATestLowersIntoThePlanWithEveryExpectation) {
  TempDir dir;
  auto r = Compile(dir.Write("p.policy", Policy("p", R"P(  test "everything" {
    run ["/usr/bin/python3", "-c", "print(1)"]
    stdin = "in"
    input "a.txt" = "A"
    input "b.txt" = "B"
    expect {
      verdict = ok
      exit = 0
      stdout = /^1$/
      stderr = /^$/
      file "/out/r.json"
      no_file "/out/secret"
    }
  }
)P" + std::string(kSuccess))));
  ASSERT_TRUE(r.ok()) << RenderAll(r);
  ASSERT_EQ(r.plan->tests.size(), 2u);
  const plan::PolicyTest& t = r.plan->tests[0];
  EXPECT_EQ(t.name, "everything");
  EXPECT_EQ(t.defined_in, "p");
  EXPECT_THAT(t.argv, ElementsAre("/usr/bin/python3", "-c", "print(1)"));
  EXPECT_EQ(t.stdin_data, "in");
  ASSERT_EQ(t.files.size(), 2u);
  EXPECT_EQ(t.files[1].name, "b.txt");
  EXPECT_EQ(t.expect.verdict, "ok");
  EXPECT_EQ(t.expect.exit_code, 0);
  EXPECT_EQ(t.expect.stdout_regex, "^1$");
  EXPECT_THAT(t.expect.files_present, ElementsAre("/out/r.json"));
  EXPECT_THAT(t.expect.files_absent, ElementsAre("/out/secret"));
  EXPECT_TRUE(plan::ExpectsDenial(t.expect)) << "no_file is a denial claim";
  EXPECT_FALSE(plan::ExpectsDenial(r.plan->tests[1].expect));
  EXPECT_EQ(r.plan->provenance.at("tests[0]").substr(0, dir.path().size()), dir.path());

  // The plan's JSON carries them and reads back equal.
  auto back = plan::PlanFromJson(plan::ToCanonicalJsonWithDigest(*r.plan));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->tests, r.plan->tests);
}

TEST(PolicyTestsTest, APlanWithoutTestsKeepsItsJson) {
  TempDir dir;
  auto r = Compile(dir.Write("p.policy", Policy("p")));
  ASSERT_TRUE(r.ok()) << RenderAll(r);
  EXPECT_EQ(plan::ToCanonicalJson(*r.plan).find("\"tests\""), std::string::npos);
}

TEST(PolicyTestsTest, MalformedTestsAreErrors) {
  TempDir dir;
  auto r = Compile(dir.Write("p.policy", Policy("p", R"P(  test "no run" {
    expect { exit = 0 }
  }
  test "no expect" {
    run ["/bin/true"]
  }
  test "bad keys" {
    run ["/bin/true"]
    rnu = 1
    expect {
      exit = 256
      verdict = finished
      stdout = "not a regex"
      exits = 1
    }
  }
  test "empty run" {
    run []
    expect { exit = 0 }
  }
  test "twice" {
    run ["/bin/true"]
    expect { exit = 0 }
  }
  test "twice" {
    run ["/bin/true"]
    expect { exit = 0 }
  }
)P")));
  EXPECT_THAT(CodesOnly(r),
              ElementsAre("E024", "E024", "E020", "E023", "E026", "E021", "E020", "E023", "E025"));
}

TEST(PolicyTestsTest, ThePlanVerifierChecksPathsAndInputs) {
  TempDir dir;
  std::string body = testing::Body();
  // A policy without an input mount cannot stage input files; expected files must be outputs.
  body.replace(body.find("  mount input at \"/in\"\n"), 23, "");
  auto r = Compile(dir.Write("p.policy", "policy \"p\" {\n" + body + R"P(  test "t" {
    run ["/bin/true"]
    input "a.txt" = "A"
    expect {
      file "/tmp/x"
      stdout = /(/
    }
  }
}
)P"));
  EXPECT_THAT(CodesOnly(r), ElementsAre("E093", "E081", "E093")) << RenderAll(r);
}

TEST(PolicyTestsTest, AChildInheritsTestsAndMayRedefineASuccessTest) {
  TempDir dir;
  dir.Write("base.policy", Policy("base", std::string(kDenial) + kSuccess));
  auto r = Compile(dir.Write("child.policy", Policy("child", R"P(  test "it runs" {
    run ["/bin/false"]
    expect { verdict = nonzero-exit }
  }
  test "child's own" {
    run ["/bin/true"]
    expect { exit = 0 }
  }
)P",
                                                    "base")));
  ASSERT_TRUE(r.ok()) << RenderAll(r);
  ASSERT_EQ(r.plan->tests.size(), 3u);
  EXPECT_EQ(r.plan->tests[0].name, "no network");
  EXPECT_EQ(r.plan->tests[0].defined_in, "base");
  EXPECT_EQ(r.plan->tests[1].name, "it runs");
  EXPECT_EQ(r.plan->tests[1].defined_in, "child");
  EXPECT_EQ(r.plan->tests[1].expect.verdict, "nonzero-exit");
  EXPECT_EQ(r.plan->tests[2].name, "child's own");
}

TEST(PolicyTestsTest, AChildMayNarrowButNeverWeakenADenialTest) {
  TempDir dir;
  dir.Write("base.policy", Policy("base", kDenial));
  // Narrowed: the same run, every expectation kept, one added.
  auto narrowed = Compile(dir.Write("a.policy", Policy("a", R"P(  test "no network" {
    run ["/bin/sh", "-c", "echo blocked"]
    expect {
      exit = 0
      stdout = /^blocked$/
      stderr = /^$/
      denied = true
    }
  }
)P",
                                                       "base")));
  EXPECT_TRUE(narrowed.ok()) << RenderAll(narrowed);

  const char* weakened[] = {// an expectation dropped
                            R"P(  test "no network" {
    run ["/bin/sh", "-c", "echo blocked"]
    expect { exit = 0 }
  }
)P",
                            // another run
                            R"P(  test "no network" {
    run ["/bin/sh", "-c", "echo reached"]
    expect {
      exit = 0
      stdout = /^blocked$/
      denied = true
    }
  }
)P",
                            // `denied` dropped, so that a later child could weaken it freely
                            R"P(  test "no network" {
    run ["/bin/sh", "-c", "echo blocked"]
    expect {
      exit = 0
      stdout = /^blocked$/
    }
  }
)P"};
  for (const char* w : weakened) {
    auto r = Compile(dir.Write("w.policy", Policy("w", w, "base")));
    EXPECT_THAT(CodesOnly(r), ElementsAre("E055")) << w;
    ASSERT_FALSE(r.diagnostics.empty());
    EXPECT_THAT(r.diagnostics[0].message, HasSubstr("expects a denial"));
  }
  // An @override does not lift it: tests take no annotations.
  auto r = Compile(dir.Write("o.policy", Policy("o", R"P(  @override("we know")
  test "no network" {
    run ["/bin/true"]
    expect { exit = 0 }
  }
)P",
                                                "base")));
  EXPECT_THAT(CodesOnly(r), ::testing::Contains("E032"));
}

TEST(PolicyTestsTest, DiffReportsRemovedAndWeakenedTests) {
  TempDir dir;
  auto old_plan = Compile(dir.Write("old.policy", Policy("p", std::string(kDenial) + kSuccess)));
  auto removed = Compile(dir.Write("new.policy", Policy("p")));
  ASSERT_TRUE(old_plan.ok() && removed.ok());
  std::vector<Change> changes = ComparePlans(*old_plan.plan, *removed.plan);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].effect, Change::Effect::kLoosens);
  EXPECT_EQ(changes[0].code, "E055");
  EXPECT_THAT(changes[0].description, HasSubstr("removes denial test \"no network\""));
  EXPECT_EQ(changes[1].effect, Change::Effect::kNeutral);
  EXPECT_THAT(changes[1].description, HasSubstr("removes success test \"it runs\""));

  auto added = ComparePlans(*removed.plan, *old_plan.plan);
  ASSERT_EQ(added.size(), 2u);
  EXPECT_EQ(added[0].effect, Change::Effect::kTightens);
  EXPECT_THAT(DescribeChanges(changes), HasSubstr("LOOSENS   removes denial test"));
}

TEST(PolicyTestsTest, ExplainListsTheTests) {
  TempDir dir;
  auto r = Compile(dir.Write("p.policy", Policy("p", kDenial)));
  ASSERT_TRUE(r.ok()) << RenderAll(r);
  EXPECT_THAT(Explain(*r.plan),
              HasSubstr("denial  \"no network\" (p): exit 0, stdout /^blocked$/"));
}

}  // namespace
}  // namespace safex::compiler
