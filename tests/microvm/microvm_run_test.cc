// Real microVM runs (QEMU -M microvm, TCG here): output, exit status, limits, mounts, refusals,
// teardown. Each test boots at least one guest (2-10 s under TCG on the build machine), so the
// suite boots as few as it can: several properties are checked per run where that stays readable.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "drivers/microvm/microvm_driver.h"
#include "tests/microvm/microvm_test_util.h"
#include "tests/support/leak_check.h"

namespace safex::microvm::testing {
namespace {

using drivers::LimitHit;
using drivers::MicrovmDriver;
using drivers::RunRequest;
using drivers::RunResult;

std::string NextRunId() {
  static int n = 0;
  return "mvt-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

class MicrovmRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    leak_options_.state_root = TestStateRoot() + "/runs";
    before_ = safex::testing::LeakSnapshot::Take(leak_options_);
  }
  void TearDown() override {
    auto leaks = safex::testing::WaitForNoLeaks(before_, std::chrono::seconds(5), leak_options_);
    EXPECT_TRUE(leaks.empty()) << "left behind:\n" << safex::testing::JoinLines(leaks);
  }

  Result<RunResult> RunPlan(const plan::Plan& p, std::vector<std::string> argv,
                            drivers::MicrovmOptions o = TestOptions(),
                            std::optional<std::string> stdin_data = std::nullopt) {
    MicrovmDriver d(o);
    RunRequest req;
    req.run_id = NextRunId();
    req.argv = std::move(argv);
    req.stdin_data = std::move(stdin_data);
    req.input_dir = input_dir_;
    req.collect_output = collector_;
    return d.Run(p, req);
  }

  safex::testing::LeakCheckOptions leak_options_;
  safex::testing::LeakSnapshot before_;
  std::string input_dir_;
  drivers::OutputCollector collector_;
};

TEST_F(MicrovmRunTest, HelloWorldExactStdoutAndExitStatus) {
  SAFEX_REQUIRE_MICROVM();
  auto r = RunPlan(BusyboxPlan(), Sh("echo hello; echo oops >&2; exit 3"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_stream.data, "hello\n");
  EXPECT_EQ(r->stderr_stream.data, "oops\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->term_signal, 0);
  EXPECT_EQ(r->limit, LimitHit::kNone);
  EXPECT_EQ(r->backend_mode, "microvm/tcg/network=none");
  EXPECT_FALSE(r->stdout_stream.truncated);
  EXPECT_GT(r->wall_ns, 0u);
  EXPECT_GT(r->cpu_ns, 0u);
  EXPECT_GT(r->peak_memory_bytes, 0u);
  EXPECT_EQ(r->teardown_error, "");
}

TEST_F(MicrovmRunTest, GuestKernelDiffersFromTheHosts) {
  SAFEX_REQUIRE_MICROVM();
  auto r = RunPlan(BusyboxPlan(), {"/bin/busybox", "uname", "-r"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  utsname u{};
  uname(&u);
  ASSERT_EQ(r->exit_code, 0) << r->stderr_stream.data;
  EXPECT_FALSE(r->stdout_stream.data.empty());
  EXPECT_NE(r->stdout_stream.data, std::string(u.release) + "\n");
  EXPECT_NE(r->stdout_stream.data.find("cloud-amd64"), std::string::npos) << r->stdout_stream.data;
}

}  // namespace
}  // namespace safex::microvm::testing
