// The warm pool's microVMs (drivers/driver.h, PreparedSandbox; microvm/pooled_vm.h): booted by
// MicrovmDriver::Prepare and set up from the plan until the agent's kSetUp, run once by
// RunPrepared. A pooled run must be
// what a cold run is to the program (same guest setup, plan, filter, evidence) and each VM serves
// one run. Each test boots real guests under TCG (seconds each): as few as the properties need.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "drivers/microvm/microvm_driver.h"
#include "plan/plan_json.h"
#include "tests/microvm/microvm_test_util.h"
#include "tests/support/leak_check.h"

namespace safex::microvm::testing {
namespace {

using drivers::MicrovmDriver;
using drivers::PreparedSandbox;
using drivers::RunRequest;
using drivers::RunResult;
using ::testing::HasSubstr;

std::string NextId(const char* prefix) {
  static int n = 0;
  return std::string(prefix) + std::to_string(getpid()) + "-" + std::to_string(++n);
}

class MicrovmPoolTest : public LeakCheckedTest {
 protected:
  std::unique_ptr<PreparedSandbox> MustPrepare(const plan::Plan& p) {
    drivers::PrepareRequest req;
    req.sandbox_id = NextId("sbx-mvt-");
    auto sb = driver_.Prepare(p, req);
    EXPECT_TRUE(sb.ok()) << sb.status().ToString();
    if (!sb.ok()) return nullptr;
    return std::move(sb).value();
  }

  Result<RunResult> RunPooled(std::unique_ptr<PreparedSandbox> sb, const plan::Plan& p,
                              std::vector<std::string> argv,
                              std::optional<std::string> stdin_data = std::nullopt) {
    RunRequest req;
    req.run_id = NextId("mvt-pool-");
    req.argv = std::move(argv);
    req.stdin_data = std::move(stdin_data);
    return driver_.RunPrepared(std::move(sb), p, req);
  }

  MicrovmDriver driver_{TestOptions()};
};

// Two VMs booted ahead: each runs its program as a cold run would (stdin, output, exit status,
// the guest's evidence checked at the hand-over), its wall clock starts at the hand-over, and a
// file the first run wrote is absent in the second.
TEST_F(MicrovmPoolTest, PooledVmsRunTheProgramUnderThePlanOnceEach) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.limits.wall_time_ns = 3'000'000'000;
  // Booted on this thread: a VM's QEMU dies with the thread that started it (driver.h).
  std::unique_ptr<PreparedSandbox> first = MustPrepare(p);
  std::unique_ptr<PreparedSandbox> second = MustPrepare(p);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(first->id(), second->id());
  EXPECT_EQ(first->plan_digest(), plan::PlanDigest(p));
  EXPECT_FALSE(first->enforcement().Differs()) << first->enforcement().Differences();
  EXPECT_FALSE(first->TakesInput()) << "its input would be a disk attached at boot";
  // Waiting longer than the plan's wall time costs the run nothing: its clock starts later.
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  ASSERT_TRUE(first->Healthy());
  ASSERT_TRUE(second->Healthy());

  auto r = RunPooled(std::move(first), p,
                     Sh("cat; echo secret > /tmp/marker; cat /tmp/marker; echo oops >&2; exit 3"),
                     "from stdin\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_stream.data, "from stdin\nsecret\n");
  EXPECT_EQ(r->stderr_stream.data, "oops\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->limit, drivers::LimitHit::kNone) << r->limit_detail;
  EXPECT_EQ(r->backend_mode, "microvm/tcg/network=none");
  EXPECT_LT(r->wall_ns, 3'000'000'000u);
  EXPECT_FALSE(r->enforcement.Differs()) << r->enforcement.Differences();
  bool kernel_seen = false;
  for (const drivers::EnforcedField& f : r->enforcement.fields)
    kernel_seen |= f.name == "guest.kernel";
  EXPECT_TRUE(kernel_seen) << "the guest's hello, from its boot, is in the run's evidence";
  EXPECT_EQ(r->teardown_error, "");

  auto again =
      RunPooled(std::move(second), p, Sh("test -e /tmp/marker && echo present || echo absent"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->stdout_stream.data, "absent\n");
  EXPECT_EQ(again->teardown_error, "");
}

// The plan's part of the spec is built and sent at the boot, before any request: a plan the
// guest could not be given exactly (here an environment name with '=') fails the pooled boot
// before QEMU starts, never a run handed the VM (the leak check: nothing left).
TEST_F(MicrovmPoolTest, APlanTheGuestCannotTakeFailsTheBootNotARun) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  p.env["A=B"] = "x";
  drivers::PrepareRequest req;
  req.sandbox_id = NextId("sbx-mvt-");
  auto sb = driver_.Prepare(p, req);
  ASSERT_FALSE(sb.ok());
  EXPECT_THAT(sb.status().message(), HasSubstr("bad environment variable"));
}

// A VM runs only the plan it was made from, and never an input directory; a refused or unused
// VM is destroyed whole (the leak check: QEMU, its cgroup, the run directory).
TEST_F(MicrovmPoolTest, AVmRunsOnlyItsOwnPlanAndARefusedOneIsDestroyedWhole) {
  SAFEX_REQUIRE_MICROVM();
  plan::Plan p = BusyboxPlan();
  plan::Plan other = BusyboxPlan();
  other.limits.pids = p.limits.pids + 1;
  auto sb = MustPrepare(p);
  ASSERT_NE(sb, nullptr);
  auto r = RunPooled(std::move(sb), other, Sh("echo ran"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("another plan"));
}

}  // namespace
}  // namespace safex::microvm::testing
