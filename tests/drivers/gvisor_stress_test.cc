// Many real runs: concurrency, and no leftovers after hundreds of runs including killed ones.
#include <signal.h>

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "tests/drivers/gvisor_test_fixture.h"

namespace safex::drivers::testing {
namespace {

TEST_F(GvisorTest, EightConcurrentRuns) {
  constexpr int kRuns = 8;
  std::vector<Result<RunResult>> results(kRuns, Status::Internal("not run"));
  std::vector<std::thread> threads;
  plan::Plan p = BasePlan();
  for (int i = 0; i < kRuns; ++i) {
    threads.emplace_back([&, i] {
      results[i] = Run(p, {"/bin/sh", "-c", "echo run-" + std::to_string(i) + " $$; sleep 0.5"});
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kRuns; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status().ToString();
    EXPECT_EQ(results[i]->exit_code, 0);
    // Each sandbox has its own pid namespace: the shell is pid 1 in every one of them.
    EXPECT_EQ(results[i]->stdout_stream.data, "run-" + std::to_string(i) + " 1\n");
    EXPECT_EQ(results[i]->teardown_error, "");
  }
}

// 200 runs, four at a time: most exit at once, one in ten is killed at its wall-time limit and
// one in ten at its memory limit. Afterwards (fixture) the machine must hold nothing extra.
TEST_F(GvisorTest, TwoHundredRunsLeaveNothingBehind) {
  constexpr int kRuns = 200, kWorkers = 4;
  std::atomic<int> next{0}, ok{0}, timeouts{0}, ooms{0}, failures{0};
  plan::Plan quick = BasePlan();
  plan::Plan slow = BasePlan();
  slow.limits.wall_time_ns = 500'000'000;
  plan::Plan hungry = BasePlan();
  hungry.limits.memory_bytes = 64ull << 20;
  std::vector<std::string> errors;
  std::mutex mu;
  auto worker = [&] {
    for (int i = next++; i < kRuns; i = next++) {
      Result<RunResult> r = Status::Internal("");
      if (i % 10 == 3) {
        r = Run(slow, {"/bin/sh", "-c", "trap '' TERM; sleep 30"});
        if (r.ok() && r->limit == LimitHit::kWallTime) ++timeouts;
      } else if (i % 10 == 7) {
        r = Run(hungry, {"/bin/sh", "-c", "x=aaaaaaaaaaaaaaaa; while :; do x=$x$x; done"});
        if (r.ok() && r->limit == LimitHit::kMemory) ++ooms;
      } else {
        r = Run(quick, {"/bin/true"});
        if (r.ok() && r->exit_code == 0) ++ok;
      }
      if (!r.ok() || !r->teardown_error.empty()) {
        ++failures;
        std::lock_guard<std::mutex> l(mu);
        errors.push_back(r.ok() ? r->teardown_error : r.status().ToString());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(ok.load(), 160);
  EXPECT_EQ(timeouts.load(), 20);
  EXPECT_EQ(ooms.load(), 20);
}

}  // namespace
}  // namespace safex::drivers::testing
