// Shared fixture for tests that run real native sandboxes through NativeDriver.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "drivers/native/native_driver.h"
#include "tests/drivers/test_plans.h"
#include "tests/support/leak_check.h"
#include "tests/support/test_support.h"

namespace safex::drivers::testing {

// A trusted plan for the native backend: the base plan's mounts and limits, default-allow
// syscalls but the usual denials.
inline plan::Plan NativePlan() {
  plan::Plan p = BasePlan();
  p.policy_name = "native-test";
  p.trust = plan::Trust::kTrusted;
  p.backend = plan::Backend::kNative;
  p.limits.wall_time_ns = 10'000'000'000ull;
  p.limits.cpu_time_ns = 2'000'000'000ull;
  p.limits.memory_bytes = 128ull << 20;
  p.limits.pids = 32;
  p.limits.output_bytes = 256 << 10;
  p.limits.disk_bytes = 16ull << 20;
  p.mounts.push_back(Output("/data/out", 4ull << 20));
  p.seccomp.rules = {{"bpf", plan::SyscallAction::kErrno, 1},
                     {"kexec_load", plan::SyscallAction::kKill, 0},
                     {"mount", plan::SyscallAction::kErrno, 1},
                     {"ptrace", plan::SyscallAction::kErrno, 1}};
  return p;
}

inline std::string NextNativeRunId() {
  static std::atomic<int> n{0};
  return "nt" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

class NativeTest : public safex::testing::LeakCheckedTest {
 protected:
  void SetUp() override {
    LeakCheckedTest::SetUp();
    SAFEX_REQUIRE_ROOT();
    driver_ = MakeDriver({});
    Status st = driver_->Probe();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void TearDown() override {
    driver_.reset();
    LeakCheckedTest::TearDown();
  }

  static std::unique_ptr<NativeDriver> MakeDriver(NativeOptions o) {
    return std::make_unique<NativeDriver>(std::move(o));
  }

  Result<RunResult> Run(const plan::Plan& p, std::vector<std::string> argv,
                        std::optional<std::string> stdin_data = std::nullopt,
                        OutputCollector collect = nullptr, std::string input_dir = "",
                        NativeDriver* driver = nullptr) {
    RunRequest req;
    req.run_id = NextNativeRunId();
    req.argv = std::move(argv);
    req.stdin_data = std::move(stdin_data);
    req.collect_output = std::move(collect);
    req.input_dir = std::move(input_dir);
    return (driver != nullptr ? driver : driver_.get())->Run(p, req);
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

  std::unique_ptr<NativeDriver> driver_;
};

}  // namespace safex::drivers::testing
