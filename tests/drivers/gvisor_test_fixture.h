// Shared fixture for tests that run real gVisor sandboxes through GvisorDriver.
#pragma once

#include <unistd.h>

#include <atomic>
#include <string>

#include <gtest/gtest.h>

#include "drivers/gvisor/gvisor_driver.h"
#include "tests/drivers/test_plans.h"
#include "tests/support/leak_check.h"
#include "tests/support/test_support.h"

namespace safex::drivers::testing {

inline const char* kRunsc = "/usr/local/bin/runsc";

// Directory of the sandbox_probe helper, bound read-only into sandboxes at /opt/safex-test.
inline std::string ProbeDir() {
  std::string p = SAFEX_SANDBOX_PROBE;
  return p.substr(0, p.rfind('/'));
}
inline const char* kProbe = "/opt/safex-test/sandbox_probe";

inline plan::Plan PlanWithProbe() {
  plan::Plan p = BasePlan();
  plan::Mount m = BindRo(ProbeDir());
  m.target = "/opt/safex-test";
  p.mounts.push_back(m);
  return p;
}

// BasePlan() with the calls killed that musl's wrappers make where glibc's make others (open,
// fork, fstat; launch/syscalls.h). The host's programs (glibc) never make them, so a run under it
// works only while the launcher (musl) does not either.
inline plan::Plan PlanKillingMuslOnlyCalls() {
  plan::Plan p = BasePlan();
  for (const char* name : {"fork", "fstat", "open"}) {
    p.seccomp.rules.push_back({name, plan::SyscallAction::kKill, 0});
  }
  return p;
}

inline std::string NextRunId() {
  static std::atomic<int> n{0};
  return "t" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

class GvisorTest : public safex::testing::LeakCheckedTest {
 protected:
  void SetUp() override {
    LeakCheckedTest::SetUp();
    SAFEX_REQUIRE_ROOT();
    SAFEX_REQUIRE(access(kRunsc, X_OK) == 0, "runsc at /usr/local/bin/runsc");
    driver_ = std::make_unique<GvisorDriver>();
    Status st = driver_->Probe();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void TearDown() override {
    driver_.reset();
    LeakCheckedTest::TearDown();
  }

  Result<RunResult> Run(const plan::Plan& p, std::vector<std::string> argv,
                        std::optional<std::string> stdin_data = std::nullopt,
                        OutputCollector collect = nullptr, std::string input_dir = "") {
    RunRequest req;
    req.run_id = NextRunId();
    req.argv = std::move(argv);
    req.stdin_data = std::move(stdin_data);
    req.collect_output = std::move(collect);
    req.input_dir = std::move(input_dir);
    return driver_->Run(p, req);
  }

  // Runs and requires the run itself to have worked (a RunResult, clean teardown).
  RunResult MustRun(const plan::Plan& p, std::vector<std::string> argv,
                    std::optional<std::string> stdin_data = std::nullopt) {
    auto r = Run(p, std::move(argv), std::move(stdin_data));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return RunResult{};
    EXPECT_EQ(r->teardown_error, "");
    return *r;
  }

  std::unique_ptr<GvisorDriver> driver_;
};

}  // namespace safex::drivers::testing
