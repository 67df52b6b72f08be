// The warm pool through the service (supervisor/serve/sandbox_pool.h): pooled runs are fresh,
// each pooled sandbox serves one run (the audit log says which, and verifies), a changed policy
// retires the sandboxes of its old plan, the pool shows on /metrics, and nothing is left after a
// stop or after the daemon is killed and restarted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "common/small_file.h"
#include "drivers/driver.h"
#include "tests/serve/serve_fixture.h"
#include "tests/serve/serve_harness.h"
#include "tests/support/leak_check.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace safex {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::ProcessOutput;
using Clock = std::chrono::steady_clock;

constexpr char kPool[] = "    pool \"python-untrusted\" { size = 2 }\n";
constexpr char kReady[] = "safex_pool_ready{policy=\"python-untrusted\"}";

class ServePoolTest : public testing::ServeFixture {
 protected:
  // A value of GET /metrics (-1 when absent).
  int64_t Metric(const std::string& name) {
    auto r = h_.Call("GET", "/metrics");
    if (!r.ok()) return -1;
    const std::string& body = r->body;
    size_t at = body.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stoll(body.substr(at + name.size() + 2));
  }
  bool WaitMetric(const std::string& name, int64_t at_least) {
    const auto until = Clock::now() + std::chrono::seconds(90);
    while (Clock::now() < until) {
      if (Metric(name) >= at_least) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // The pooled policy's source in the service's policy directory, and a rewrite of it.
  std::string PolicyPath() { return h_.policy_dir() + "/python-untrusted.policy"; }
  std::string PolicyText() { return ReadSmallFile(PolicyPath()).value_or(""); }
  void WritePolicy(const std::string& text) {
    std::ofstream(PolicyPath(), std::ios::trunc) << text;
  }
  json SubmitJson(const std::vector<std::string>& argv) {
    ProcessOutput r = h_.Submit("python-untrusted", argv, {"--json"});
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
    return j;
  }
};

TEST_F(ServePoolTest, PooledRunsAreFreshAndEachSandboxServesOneRun) {
  std::filesystem::create_directories(h_.state_dir());
  ASSERT_EQ(h_.Start({.extra = kPool}), "");
  before_ = testing::LeakSnapshot::Take(LeakOptions());
  ASSERT_TRUE(WaitMetric(kReady, 2)) << h_.log();

  json first = SubmitJson({"/bin/sh", "-c", "echo secret > /tmp/marker; cat /tmp/marker"});
  EXPECT_EQ(first["verdict"], "ok") << first.dump();
  EXPECT_EQ(first["stdout"]["text"], "secret\n");
  ASSERT_TRUE(first.contains("sandbox")) << first.dump();
  EXPECT_EQ(first["sandbox"]["pooled"], true);
  const std::string first_sandbox = first["sandbox"]["id"];
  ASSERT_TRUE(WaitMetric(kReady, 2)) << h_.log();
  json second = SubmitJson({"/bin/sh", "-c", "test -e /tmp/marker && echo present || echo absent"});
  EXPECT_EQ(second["stdout"]["text"], "absent\n") << second.dump();
  ASSERT_TRUE(second.contains("sandbox")) << second.dump();
  EXPECT_NE(second["sandbox"]["id"], first_sandbox);
  // A run with input files is pooled too: the files are moved into the waiting sandbox.
  ASSERT_TRUE(WaitMetric(kReady, 2)) << h_.log();
  const std::string in = h_.dir().Join("in");
  std::filesystem::create_directories(in);
  std::ofstream(in + "/numbers.txt") << "1 2 3\n";
  ProcessOutput with_input = h_.Submit(
      "python-untrusted",
      {"/bin/sh", "-c", "cat /data/in/numbers.txt; echo x >> /data/in/numbers.txt || echo ro"},
      {"--json", "--input", in});
  json third = json::parse(with_input.out, nullptr, false);
  ASSERT_FALSE(third.is_discarded()) << with_input.out << with_input.err;
  EXPECT_EQ(third["stdout"]["text"], "1 2 3\nro\n") << third.dump();
  ASSERT_TRUE(third.contains("sandbox")) << third.dump();
  EXPECT_EQ(third["sandbox"]["pooled"], true);
  EXPECT_EQ(ReadSmallFile(in + "/numbers.txt").value_or(""), "1 2 3\n");
  EXPECT_GE(Metric("safex_pool_hits_total"), 3);
  EXPECT_GE(Metric("safex_pool_refills_total"), 4);

  // Each run's end event names its sandbox, and the log verifies (one run per sandbox).
  auto log = h_.OpenAudit();
  ASSERT_NE(log, nullptr);
  int named = 0;
  ASSERT_TRUE(log->ForEachEvent([&](const audit::EventRow& e) {
                   if (e.text(audit::kColKind) == "end" &&
                       e.text(audit::kColEnforcement).find("pooled " + first_sandbox) !=
                           std::string_view::npos) {
                     ++named;
                   }
                   return Status::Ok();
                 })
                  .ok());
  EXPECT_EQ(named, 1);
  auto verified = log->Verify();
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok) << verified->problem;
  ASSERT_TRUE(WaitMetric(kReady, 2)) << h_.log();  // refilled: two wait when the service stops
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  ExpectNoLeaks();  // the waiting sandboxes went with the service
  // Every sandbox made is a chained event, and every one that served no run was evicted (at the
  // stop at the latest) with its reason: made = evicted + the two that served the runs.
  std::map<std::string, std::string> made;  // id -> how it ended
  ASSERT_TRUE(log->ForEachEvent([&](const audit::EventRow& e) {
                   if (e.text(audit::kColKind) != "sandbox") return Status::Ok();
                   const std::string id(e.text(audit::kColRunId));
                   if (e.text(audit::kColPurpose) == "made") {
                     EXPECT_EQ(made.count(id), 0u) << id;
                     EXPECT_NE(e.text(audit::kColEnforcement), "") << id;
                     made[id] = "";
                   } else {
                     EXPECT_EQ(made.count(id), 1u) << id;
                     made[id] = std::string(e.text(audit::kColReason));
                   }
                   return Status::Ok();
                 })
                  .ok());
  EXPECT_GE(made.size(), 4u);
  EXPECT_EQ(made[first_sandbox], "") << "served a run: no eviction";
  EXPECT_EQ(made[second["sandbox"]["id"].get<std::string>()], "");
  int stopped = 0;
  for (const auto& [id, why] : made) stopped += why == "the service stopped";
  EXPECT_EQ(stopped, 2) << "the two waiting at the stop";
  EXPECT_TRUE(log->Verify()->ok);
}

// A policy edited while sandboxes wait: none made from the old plan is handed out.
TEST_F(ServePoolTest, AChangedPolicyRetiresTheSandboxesOfItsOldPlan) {
  std::filesystem::create_directories(h_.state_dir());
  ASSERT_EQ(h_.Start({.extra = kPool}), "");
  before_ = testing::LeakSnapshot::Take(LeakOptions());
  ASSERT_TRUE(WaitMetric(kReady, 2)) << h_.log();
  json old_plan = SubmitJson({"/bin/true"});
  std::string text = PolicyText();
  const size_t at = text.find("wall_time = 10s");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 15, "wall_time = 9s");
  WritePolicy(text);
  json changed = SubmitJson({"/bin/echo", "new"});
  EXPECT_EQ(changed["verdict"], "ok") << changed.dump();
  EXPECT_NE(changed["plan_digest"], old_plan["plan_digest"]);
  // Whether it found a new sandbox ready or made its own, it ran under the new plan; the old
  // plan's sandboxes are evicted.
  EXPECT_TRUE(WaitMetric("safex_pool_evictions_total", 1)) << h_.log();
  ASSERT_TRUE(WaitMetric(kReady, 2)) << h_.log();
  json pooled = SubmitJson({"/bin/echo", "pooled"});
  EXPECT_EQ(pooled["plan_digest"], changed["plan_digest"]);
  EXPECT_TRUE(pooled.contains("sandbox")) << pooled.dump();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  ExpectNoLeaks();
}

// A pooled policy that does not compile is said in the log (the pool stays empty, its runs
// are refused as any run of it is), and so is the pool's first plan once it is fixed.
TEST_F(ServePoolTest, APooledPolicyThatDoesNotCompileIsSaidInTheLogUntilItIsFixed) {
  const std::string text = PolicyText();
  ASSERT_FALSE(text.empty());
  WritePolicy("policy \"python-untrusted\" {\n  no such thing\n");
  std::filesystem::create_directories(h_.state_dir());
  ASSERT_EQ(h_.Start({.extra = kPool}), "");
  auto logged = [this](const std::string& what) {
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < until) {
      if (h_.log().find(what) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  EXPECT_TRUE(logged("pool python-untrusted: not filled: ")) << h_.log();
  EXPECT_EQ(Metric(kReady), 0);
  WritePolicy(text);
  EXPECT_TRUE(logged("pool python-untrusted: filled from plan ")) << h_.log();
  EXPECT_TRUE(WaitMetric(kReady, 2)) << h_.log();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
}

// A host path the plan binds changes while sandboxes wait (as a package upgrade would): the run
// right after it gets no sandbox made before it (the generation is checked as the run takes one,
// not only at the pool's next tending pass) but is handed the first replacement, booted at once
// (the stale ones do not count as filling the pool), and the waiting ones are evicted.
TEST_F(ServePoolTest, AChangedBindSourceRetiresTheWaitingSandboxesAtTheNextRun) {
  testing::TempDir ref;
  ASSERT_EQ(chmod(ref.path().c_str(), 0755), 0);  // the sandbox's user reads it
  ref.Write("version", "1\n");
  std::string text = PolicyText();
  const size_t end = text.rfind('}');
  ASSERT_NE(end, std::string::npos);
  text.insert(end, "  @override(\"a test's reference data\") mount bind \"" + ref.path() +
                       "\" at \"/opt/ref\"\n");
  WritePolicy(text);
  std::filesystem::create_directories(h_.state_dir());
  ASSERT_EQ(h_.Start({.extra = kPool}), "");
  before_ = testing::LeakSnapshot::Take(LeakOptions());
  ASSERT_TRUE(WaitMetric(kReady, 2)) << h_.log();
  json before = SubmitJson({"/bin/cat", "/opt/ref/version"});
  EXPECT_EQ(before["stdout"]["text"], "1\n") << before.dump();
  ASSERT_TRUE(WaitMetric(kReady, 2)) << h_.log();
  const int64_t evicted = Metric("safex_pool_evictions_total");

  const int64_t changed_ns = drivers::RealtimeNs();
  ref.Write("version2", "2\n");  // a new entry: the bound directory's mtime changes
  json after = SubmitJson({"/bin/cat", "/opt/ref/version2"});
  EXPECT_EQ(after["verdict"], "ok") << after.dump();
  EXPECT_EQ(after["stdout"]["text"], "2\n") << after.dump();
  EXPECT_TRUE(after.contains("sandbox"))
      << "the run did not wait for the replacement: " << after.dump();
  if (after.contains("sandbox")) {
    EXPECT_GT(after["sandbox"]["created_ns"].get<int64_t>(), changed_ns) << after.dump();
  }
  EXPECT_TRUE(WaitMetric("safex_pool_evictions_total", evicted + 2)) << h_.log();
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  ExpectNoLeaks();
}

// A pool of a microVM policy: its guest waits booted at the agent's hello; a run without input
// is handed it, a run with input files makes its own VM (its input is a disk attached at boot);
// at the stop the waiting VM goes whole (QEMU, its cgroup, its directory).
TEST_F(ServePoolTest, AMicrovmPoolServesRunsWithoutInputAndLeavesInputRunsCold) {
  SAFEX_REQUIRE_INSTALLED_GUEST();
  const std::string microvm_runs = "/var/lib/safex/microvm/runs";
  const std::string ready = "safex_pool_ready{policy=\"base-microvm\"}";
  WriteMicrovmPolicy();
  std::filesystem::create_directories(h_.state_dir());
  ASSERT_EQ(h_.Start({.extra = "    pool \"base-microvm\" { size = 1 }\n"}), "");
  before_ = testing::LeakSnapshot::Take(LeakOptions());
  ASSERT_TRUE(WaitMetric(ready, 1)) << h_.log();

  ProcessOutput r =
      h_.Submit("base-microvm", {"/bin/sh", "-c", "uname -r; echo pooled"}, {"--json"});
  json pooled = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(pooled.is_discarded()) << r.out << r.err;
  EXPECT_EQ(pooled["verdict"], "ok") << pooled.dump();
  ASSERT_TRUE(pooled.contains("sandbox")) << pooled.dump();
  EXPECT_EQ(pooled["sandbox"]["pooled"], true);
  EXPECT_THAT(pooled["stdout"]["text"].get<std::string>(), HasSubstr("pooled\n"));

  ASSERT_TRUE(WaitMetric(ready, 1)) << h_.log();
  const std::string in = h_.dir().Join("in");
  std::filesystem::create_directories(in);
  std::ofstream(in + "/numbers.txt") << "1 2 3\n";
  r = h_.Submit("base-microvm", {"/bin/cat", "/data/in/numbers.txt"}, {"--json", "--input", in});
  json cold = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(cold.is_discarded()) << r.out << r.err;
  EXPECT_EQ(cold["verdict"], "ok") << cold.dump();
  EXPECT_EQ(cold["stdout"]["text"], "1 2 3\n");
  EXPECT_FALSE(cold.contains("sandbox")) << "a run with input files is not pooled on microVM";
  EXPECT_EQ(Metric(ready), 1) << "the waiting VM was not taken";

  auto log = h_.OpenAudit();
  ASSERT_NE(log, nullptr);
  auto verified = log->Verify();
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok) << verified->problem;
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  ExpectNoLeaks();
  for (const auto& e : std::filesystem::directory_iterator(microvm_runs)) {
    EXPECT_FALSE(e.path().filename().string().starts_with("sbx-")) << "left: " << e.path();
  }
}

// Killed with sandboxes waiting: the next start removes them (they never ran anything, so no
// run is closed as interrupted for them).
TEST_F(ServePoolTest, WaitingSandboxesOfAKilledServiceAreRemovedAtTheNextStart) {
  std::filesystem::create_directories(h_.state_dir());
  ASSERT_EQ(h_.Start({.extra = kPool}), "");
  before_ = testing::LeakSnapshot::Take(LeakOptions());
  ASSERT_TRUE(WaitMetric(kReady, 2)) << h_.log();
  h_.Kill();
  ASSERT_EQ(h_.Start(), "");  // no pool this time: whatever is left is the killed one's
  EXPECT_EQ(h_.HealthNumber("recovered_runs"), 0);
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  ExpectNoLeaks();
  // The audit trail: every sandbox the killed service made has an end, its eviction by the next
  // start's recovery, and the log verifies.
  auto log = h_.OpenAudit();
  ASSERT_NE(log, nullptr);
  std::map<std::string, std::string> made;  // id -> why it was evicted
  ASSERT_TRUE(log->ForEachEvent([&](const audit::EventRow& e) {
                   if (e.text(audit::kColKind) != "sandbox") return Status::Ok();
                   const std::string id(e.text(audit::kColRunId));
                   made[id] = e.text(audit::kColPurpose) == "made"
                                  ? ""
                                  : std::string(e.text(audit::kColReason));
                   return Status::Ok();
                 })
                  .ok());
  EXPECT_GE(made.size(), 2u);
  for (const auto& [id, why] : made) {
    EXPECT_THAT(why, HasSubstr("ended without destroying it")) << id;
  }
  auto unended = log->UnendedSandboxes();
  ASSERT_TRUE(unended.ok());
  EXPECT_TRUE(unended->empty());
  auto verified = log->Verify();
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok) << verified->problem;
}

}  // namespace
}  // namespace safex
