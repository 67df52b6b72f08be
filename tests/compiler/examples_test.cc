// Every example policy checks and compiles; its plan matches tests/golden/<name>.json byte for
// byte. Regenerate the golden files after an intended change with:
//   SAFEX_UPDATE_GOLDEN=1 ./build/tests/compiler/compiler_examples_test
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/compiler.h"
#include "compiler/host_config.h"
#include "plan/plan_json.h"
#include "plan/verify.h"
#include "tests/support/test_support.h"

namespace safex::compiler {
namespace {

namespace fs = std::filesystem;

// Paths are recorded as given, so compile from the source dir with relative paths: the golden
// files then hold "policies/examples/x.policy" wherever the checkout lives.
class ExamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(chdir(safex::testing::SourceDir().c_str()), 0);
    auto c = LoadHostConfig("policies/host.policy");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    options_.ceilings = *c;
  }
  static std::vector<std::string> Examples() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator("policies/examples")) {
      if (e.path().extension() == ".policy") out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  CompileOptions options_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST_F(ExamplesTest, TheSixExamplesExist) {
  auto ex = Examples();
  for (const char* name : {"base-untrusted", "python-untrusted", "node-untrusted",
                           "compile-and-test", "notebook-egress", "trusted-tool"}) {
    EXPECT_NE(std::find(ex.begin(), ex.end(), std::string("policies/examples/") + name + ".policy"),
              ex.end())
        << name;
  }
}

TEST_F(ExamplesTest, EveryExampleCompilesCleanAndMatchesItsGoldenPlan) {
  bool update = std::getenv("SAFEX_UPDATE_GOLDEN") != nullptr;
  for (const auto& path : Examples()) {
    auto r = CompileFile(path, options_);
    ASSERT_TRUE(r.ok()) << path << "\n" << RenderAll(r);
    EXPECT_TRUE(r.diagnostics.empty()) << path << "\n" << RenderAll(r);
    std::string json = plan::ToCanonicalJsonWithDigest(*r.plan) + "\n";
    std::string golden = "tests/golden/" + fs::path(path).stem().string() + ".json";
    if (update) {
      std::ofstream(golden, std::ios::binary) << json;
      continue;
    }
    ASSERT_TRUE(fs::exists(golden)) << golden << " missing: run with SAFEX_UPDATE_GOLDEN=1";
    EXPECT_EQ(json, ReadAll(golden))
        << path << " no longer compiles to " << golden << " (SAFEX_UPDATE_GOLDEN=1 regenerates it)";
  }
}

TEST_F(ExamplesTest, RoundTripAndDeterminism) {
  for (const auto& path : Examples()) {
    auto a = CompileFile(path, options_);
    auto b = CompileFile(path, options_);
    ASSERT_TRUE(a.ok() && b.ok()) << path;
    std::string ja = plan::ToCanonicalJsonWithDigest(*a.plan);
    EXPECT_EQ(ja, plan::ToCanonicalJsonWithDigest(*b.plan)) << path;
    auto back = plan::PlanFromJson(ja);
    ASSERT_TRUE(back.ok()) << path << ": " << back.status().ToString();
    EXPECT_TRUE(plan::Verify(*back, options_.ceilings).empty()) << path;
    EXPECT_EQ(plan::ToCanonicalJsonWithDigest(*back), ja) << path;
  }
}

TEST_F(ExamplesTest, ExamplesAreTight) {
  // The untrusted examples stay far below the default ceilings and never allow native.
  for (const auto& path : Examples()) {
    auto r = CompileFile(path, options_);
    ASSERT_TRUE(r.ok());
    const auto& p = *r.plan;
    if (p.trust != plan::Trust::kUntrusted) continue;
    EXPECT_NE(p.backend, plan::Backend::kNative) << path;
    EXPECT_LE(p.limits.memory_bytes, 1ULL << 30) << path;
    EXPECT_LE(p.limits.wall_time_ns, 120'000'000'000ULL) << path;
    EXPECT_LE(p.limits.pids, 64u) << path;
    EXPECT_LE(p.network.egress.size(), 1u) << path;
    for (const auto& m : p.mounts) {
      if (!m.read_only) {
        EXPECT_TRUE(m.noexec) << path << " " << m.target;
      }
    }
  }
}

TEST_F(ExamplesTest, TrustedToolNeedsTheOperatorsPermission) {
  auto r = CompileFile("policies/examples/trusted-tool.policy", CompileOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.diagnostics[0].code, "E062");
}

TEST_F(ExamplesTest, ExamplesAreFormatted) {
  // `safex fmt --check` over the examples is exercised by the CLI test; here only that they parse.
  for (const auto& path : Examples()) EXPECT_FALSE(ReadAll(path).empty()) << path;
}

}  // namespace
}  // namespace safex::compiler
