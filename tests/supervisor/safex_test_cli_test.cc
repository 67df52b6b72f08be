// `safex test` end to end: the built binary runs the example policies' own tests and the built-in
// probes for real under gVisor, the microVM (TCG here; the test host opts in) and, for trusted
// policies, the native backend, records each run
// in the audit log marked as a test, and fails with a clear row when a test's claim is false.
// Root; skipped outside CI only. Every test also checks that nothing is left on the machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "tests/support/leak_check.h"
#include "tests/support/run_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_host_config.h"
#include "tests/support/test_support.h"

namespace safex {
namespace {

using ::testing::HasSubstr;
using testing::ProcessOutput;
using testing::RunSafex;
using testing::TempDir;

std::string Examples() { return testing::SourceDir() + "/policies/examples"; }

class SafexTestCliTest : public testing::LeakCheckedTest {
 protected:
  void SetUp() override {
    SAFEX_REQUIRE_ROOT();
    SAFEX_REQUIRE(access("/usr/local/bin/runsc", X_OK) == 0, "runsc (scripts/install-deps.sh)");
    SAFEX_REQUIRE(access("/usr/bin/qemu-system-x86_64", X_OK) == 0,
                  "QEMU (scripts/install-deps.sh)");
    SAFEX_REQUIRE(access("/usr/local/lib/safex/guest/initramfs.cpio", R_OK) == 0,
                  "the microVM guest (scripts/build-guest.sh)");
    LeakCheckedTest::SetUp();
  }

  // safex test --json [args...] POLICIES...; the rows, and the exit status in *status.
  nlohmann::json Test(const std::vector<std::string>& args, int* status) {
    std::vector<std::string> cmd = {
        "test",
        "--json",
        "--search-path",
        Examples(),
        "--audit-db",
        dir_.Join("audit.db"),
        "--audit-key",
        dir_.Join("audit.key"),
        "--host-config",
        dir_.Write("host.policy", std::string("host {\n") + testing::kTestBackends + "}\n")};
    cmd.insert(cmd.end(), args.begin(), args.end());
    // The first microVM run with the standard binds may build the /usr image (minutes).
    ProcessOutput r = RunSafex(cmd, "", std::chrono::seconds(1500));
    *status = r.status;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_array()) << "not a JSON array: " << r.out << "\nstderr: " << r.err;
    return j.is_array() ? j : nlohmann::json::array();
  }

  std::vector<audit::RunSummary> AuditRuns() {
    audit::AuditOptions o;
    o.read_only = true;
    auto log = audit::AuditLog::Open(dir_.Join("audit.db"), o);
    EXPECT_TRUE(log.ok()) << log.status().message();
    if (!log.ok()) return {};
    auto runs = (*log)->ListRuns({});
    EXPECT_TRUE(runs.ok()) << runs.status().message();
    return runs.ok() ? *runs : std::vector<audit::RunSummary>{};
  }

  TempDir dir_;
};

std::string Failures(const nlohmann::json& rows) {
  std::string out;
  for (const auto& r : rows) {
    if (r["passed"].get<bool>()) continue;
    out += r["policy"].get<std::string>() + "/" + r["test"].get<std::string>() + " on " +
           r["backend"].get<std::string>() + ": " + r["observed"].get<std::string>() + "\n";
    for (const auto& f : r["failures"]) out += "  " + f.get<std::string>() + "\n";
  }
  return out;
}

TEST_F(SafexTestCliTest, EveryExamplePolicysTestsPassOnGvisorAndMicrovm) {
  int status = -1;
  nlohmann::json rows =
      Test({"--backend", "all", Examples() + "/base-untrusted.policy",
            Examples() + "/python-untrusted.policy", Examples() + "/node-untrusted.policy",
            Examples() + "/compile-and-test.policy", Examples() + "/trusted-tool.policy"},
           &status);
  EXPECT_EQ(status, 0) << Failures(rows);
  std::map<std::string, int> passed;  // by backend
  std::map<std::string, int> skipped;
  for (const auto& r : rows) {
    if (r["kind"] == "skipped") {
      ++skipped[r["policy"].get<std::string>()];
    } else if (r["passed"].get<bool>()) {
      ++passed[r["backend"].get<std::string>()];
    }
  }
  // 5 of base-untrusted, 12 of python-untrusted and 6 of node-untrusted (5 of them inherited),
  // 1 of compile-and-test, 4 of trusted-tool.
  EXPECT_EQ(passed["gvisor"], 28) << rows.dump(1);
  EXPECT_EQ(passed["microvm"], 28) << rows.dump(1);
  // Native takes the trusted policies' tests (trusted-tool's 4, compile-and-test's 1); the
  // three untrusted policies may not run there (a skipped row each, never a pass).
  EXPECT_EQ(passed["native"], 5) << rows.dump(1);
  EXPECT_EQ(skipped, (std::map<std::string, int>{
                         {"base-untrusted", 1}, {"node-untrusted", 1}, {"python-untrusted", 1}}))
      << rows.dump(1);

  // Each test is a run in the audit log, marked as a test.
  std::map<std::string, std::string> purposes;
  for (const audit::RunSummary& run : AuditRuns()) purposes[run.run_id] = run.purpose;
  for (const auto& r : rows) {
    if (r["kind"] != "test") continue;
    const std::string id = r["run_id"];
    ASSERT_TRUE(purposes.count(id)) << id;
    EXPECT_EQ(purposes[id],
              "test " + r["policy"].get<std::string>() + "/" + r["test"].get<std::string>());
  }
}

TEST_F(SafexTestCliTest, EveryBuiltInProbeIsDeniedOnGvisorAndMicrovm) {
  int status = -1;
  nlohmann::json rows =
      Test({"--builtin", "--backend", "all", Examples() + "/python-untrusted.policy"}, &status);
  EXPECT_EQ(status, 0) << Failures(rows);
  std::map<std::string, int> probes;
  for (const auto& r : rows) {
    if (r["kind"] == "probe" && r["passed"].get<bool>()) ++probes[r["backend"].get<std::string>()];
  }
  // metadata, egress, memory, pids, CPU, output, root, unmounted path, errno rule, kill rule.
  EXPECT_EQ(probes["gvisor"], 10) << rows.dump(1);
  EXPECT_EQ(probes["microvm"], 10) << rows.dump(1);
  for (const audit::RunSummary& run : AuditRuns()) {
    EXPECT_TRUE(run.purpose.rfind("test python-untrusted/", 0) == 0 ||
                run.purpose.rfind("probe python-untrusted/", 0) == 0)
        << run.run_id << ": " << run.purpose;
  }
}

TEST_F(SafexTestCliTest, EveryBuiltInProbeIsDeniedOnNativeForTheTrustedTool) {
  int status = -1;
  nlohmann::json rows =
      Test({"--builtin", "--backend", "native", Examples() + "/trusted-tool.policy"}, &status);
  EXPECT_EQ(status, 0) << Failures(rows);
  int probes = 0;
  for (const auto& r : rows) {
    EXPECT_EQ(r["backend"], "native") << r.dump();
    if (r["kind"] == "probe" && r["passed"].get<bool>()) ++probes;
  }
  // metadata, egress, memory, pids, CPU, output, root, unmounted path (its syscall rules only
  // allow: no errno or kill rule to probe).
  EXPECT_EQ(probes, 8) << rows.dump(1);
}

TEST_F(SafexTestCliTest, AFalseClaimFailsWithARowThatSaysWhy) {
  const std::string policy =
      dir_.Write("claims.policy", R"P(policy "claims" extends "base-untrusted" {
  test "the network is reachable" {
    run ["/bin/sh", "-c", "echo blocked"]
    expect {
      exit = 0
      stdout = /^reached$/
    }
  }
  test "true fails" {
    run ["/bin/true"]
    expect { exit = 1 }
  }
}
)P");
  int status = -1;
  nlohmann::json rows = Test({policy}, &status);
  EXPECT_EQ(status, 1);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& r : rows) by_name[r["test"].get<std::string>()] = r;
  ASSERT_TRUE(by_name.count("the network is reachable")) << rows.dump(1);
  EXPECT_FALSE(by_name["the network is reachable"]["passed"].get<bool>());
  EXPECT_THAT(by_name["the network is reachable"]["failures"][0].get<std::string>(),
              HasSubstr("expected stdout to match /^reached$/, got \"blocked\\n\""));
  EXPECT_THAT(by_name["true fails"]["failures"][0].get<std::string>(),
              HasSubstr("expected exit 1, got exit 0"));
  // The inherited tests of base-untrusted still ran, and passed.
  ASSERT_TRUE(by_name.count("the root file system is read-only"));
  EXPECT_TRUE(by_name["the root file system is read-only"]["passed"].get<bool>());
}

TEST_F(SafexTestCliTest, APolicyThatDoesNotCompileIsAFailureNotASkip) {
  const std::string policy =
      dir_.Write("broken.policy", "policy \"broken\" {\n  trust = maybe\n}\n");
  int status = -1;
  nlohmann::json rows = Test({policy}, &status);
  EXPECT_EQ(status, 1);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["kind"], "error");
  EXPECT_FALSE(rows[0]["passed"].get<bool>());
}

}  // namespace
}  // namespace safex
