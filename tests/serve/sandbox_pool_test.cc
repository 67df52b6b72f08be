// The warm pool's scheduling (supervisor/serve/sandbox_pool.h) with a driver whose boots are slow
// and countable: what Take hands out and how long a run waits. The sandboxes themselves are real
// in the integration tests (tests/serve/serve_pool_test.cc, tests/drivers/gvisor_pool_test.cc);
// here only the pool's own decisions are under test.
#include "supervisor/serve/sandbox_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "audit/time_format.h"
#include "plan/plan_json.h"
#include "supervisor/serve/recovery.h"

namespace safex::serve {
namespace {

using Clock = std::chrono::steady_clock;

class CountedSandbox : public drivers::PreparedSandbox {
 public:
  CountedSandbox(std::string id, std::string digest, std::string generation, bool takes_input)
      : PreparedSandbox(std::move(id), std::move(digest), std::move(generation),
                        drivers::RealtimeNs()),
        takes_input_(takes_input) {}
  bool Healthy() override { return true; }
  bool TakesInput() const override { return takes_input_; }

 private:
  bool takes_input_;
};

// Prepare takes `boot` (as a real boot would), unless the pool is stopping.
class SlowBootDriver : public drivers::Driver {
 public:
  explicit SlowBootDriver(std::chrono::milliseconds boot) : boot_(boot) {}
  const char* name() const override { return "slow-boot"; }
  Status Probe() override { return Status::Ok(); }
  Result<drivers::RunResult> Run(const plan::Plan&, const drivers::RunRequest&) override {
    return Status::Unavailable("not used");
  }
  Result<std::unique_ptr<drivers::PreparedSandbox>> Prepare(
      const plan::Plan& plan, const drivers::PrepareRequest& req) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      starts_.push_back(Clock::now());
    }
    const auto until = Clock::now() + boot_;
    while (Clock::now() < until) {
      if (req.cancel != nullptr && req.cancel->load() != 0) return Status::Unavailable("stopping");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ++boots;
    return std::unique_ptr<drivers::PreparedSandbox>(std::make_unique<CountedSandbox>(
        req.sandbox_id, plan::PlanDigest(plan), SandboxGeneration(plan), takes_input));
  }
  std::string SandboxGeneration(const plan::Plan&) override {
    std::lock_guard<std::mutex> l(mu_);
    return generation_;
  }
  void set_generation(std::string g) {  // as a runtime upgrade would change it
    std::lock_guard<std::mutex> l(mu_);
    generation_ = std::move(g);
  }
  Status CleanupStale(int* cleaned) override {
    *cleaned = 0;
    return Status::Ok();
  }
  Status CleanupStaleRun(const std::string&, bool* cleaned) override {
    *cleaned = false;
    return Status::Ok();
  }
  uint64_t SandboxMemoryBytes(const plan::Plan& plan) const override {
    return memory_per_sandbox != 0 ? memory_per_sandbox : plan.limits.memory_bytes;
  }
  // When each Prepare began, in order.
  std::vector<Clock::time_point> starts() {
    std::lock_guard<std::mutex> l(mu_);
    return starts_;
  }
  std::atomic<int> boots{0};
  bool takes_input = true;          // what its sandboxes say (a microVM's: false)
  uint64_t memory_per_sandbox = 0;  // 0: the plan's memory limit

 private:
  std::chrono::milliseconds boot_;
  std::mutex mu_;
  std::vector<Clock::time_point> starts_;
  std::string generation_ = "g1";
};

// Holds the tending thread inside its pass (in the plan resolver) while closed, as a pass busy
// with another pool's evictions or a slow policy compile would.
class TendGate {
 public:
  void Close() {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
  }
  void Open() {
    {
      std::lock_guard<std::mutex> l(mu_);
      closed_ = false;
    }
    cv_.notify_all();
  }
  void Pass() {
    std::unique_lock<std::mutex> l(mu_);
    ++held_;
    cv_.notify_all();
    cv_.wait(l, [this] { return !closed_; });
    --held_;
  }
  // True once the tending thread is held (within 5 s).
  bool Holding() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(5), [this] { return held_ > 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  int held_ = 0;
};

class SandboxPoolTest : public ::testing::Test {
 protected:
  void StartPool(std::chrono::milliseconds boot, uint32_t size, bool takes_input = true,
                 uint64_t memory_per_sandbox = 0, uint64_t budget = 1ull << 40) {
    auto driver = std::make_unique<SlowBootDriver>(boot);
    driver->takes_input = takes_input;
    driver->memory_per_sandbox = memory_per_sandbox;
    driver_ = driver.get();
    std::map<plan::Backend, std::unique_ptr<drivers::Driver>> drivers;
    drivers[plan::Backend::kGvisor] = std::move(driver);
    backends_ = std::make_unique<drivers::Backends>(std::move(drivers));
    auto prepared = std::make_shared<supervisor::PreparedPlan>();
    prepared->plan.policy_name = "pooled";
    prepared->plan.backend = plan::Backend::kGvisor;
    prepared->plan.limits.memory_bytes = 64 << 20;
    prepared->digest = plan::PlanDigest(prepared->plan);
    digest_ = prepared->digest;
    compiler::PoolRule rule;
    rule.policy = "pooled";
    rule.size = size;
    pool_ = std::make_unique<SandboxPool>(
        std::vector<compiler::PoolRule>{rule}, budget, backends_.get(),
        [prepared,
         this](const std::string&) -> Result<std::shared_ptr<const supervisor::PreparedPlan>> {
          tend_gate_.Pass();
          return std::shared_ptr<const supervisor::PreparedPlan>(prepared);
        },
        [](const audit::SandboxEvent&) { return Status::Ok(); });
    pool_->Start();
  }
  bool WaitFor(const std::function<bool(const PoolStats&)>& pred) {
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < until) {
      if (pred(pool_->stats())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // A pool of `size` (boots of 20 ms) fills and a run takes one sandbox: how long after the take
  // the refill's boot began; -1 s when the pool did not come back to `size` with one more boot.
  Clock::duration RefillBeganAfterTake(uint32_t size) {
    StartPool(std::chrono::milliseconds(20), size);
    auto full = [size](const PoolStats& s) { return s.ready == size; };
    if (!WaitFor(full)) return -std::chrono::seconds(1);
    const auto taken = Clock::now();
    if (pool_->Take("pooled", digest_, false) == nullptr) return -std::chrono::seconds(1);
    if (!WaitFor(full)) return -std::chrono::seconds(1);
    const std::vector<Clock::time_point> starts = driver_->starts();
    if (starts.size() != size + 1) return -std::chrono::seconds(1);
    return starts.back() - taken;
  }
  void TearDown() override {
    tend_gate_.Open();
    if (pool_) pool_->Stop();
  }

  TendGate tend_gate_;
  SlowBootDriver* driver_ = nullptr;
  std::unique_ptr<drivers::Backends> backends_;
  std::unique_ptr<SandboxPool> pool_;
  std::string digest_;
};

// A runtime upgrade (another Driver::SandboxGeneration) counts from the take on, not from the
// next tending pass: a run right after it gets no sandbox made before it. Those do not count as
// filling the pool either: the run waits for their replacement (a hit), made by the new runtime,
// rather than go away to boot a sandbox of its own beside the pool's.
TEST_F(SandboxPoolTest, ASandboxOfAReplacedRuntimeIsNeverHandedOut) {
  StartPool(std::chrono::milliseconds(20), 2);
  ASSERT_TRUE(WaitFor([](const PoolStats& s) { return s.ready == 2; }));
  driver_->set_generation("g2");
  auto sb = pool_->Take("pooled", digest_, false);
  ASSERT_NE(sb, nullptr) << "the run did not wait for the replacement of the stale sandboxes";
  EXPECT_EQ(sb->generation(), "g2");
  EXPECT_EQ(pool_->stats().hits, 1u);
  ASSERT_TRUE(WaitFor([](const PoolStats& s) { return s.evictions == 2 && s.ready == 2; }));
  sb = pool_->Take("pooled", digest_, false);
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sb->generation(), "g2");
}

// After a runsc upgrade the replacement boots at once, not after the tending pass evicted the
// stale sandboxes: with that pass held up (in the resolver, before it reads the generation), the
// first run is still handed a sandbox of the new runtime, within a boot and a wake-up, where it
// would otherwise wait its whole TakeWait (2 s) and miss.
TEST_F(SandboxPoolTest, AStaleSandboxIsReplacedWithoutWaitingForItsEviction) {
  StartPool(std::chrono::milliseconds(20), 2);
  ASSERT_TRUE(WaitFor([](const PoolStats& s) { return s.ready == 2; }));
  tend_gate_.Close();
  ASSERT_TRUE(tend_gate_.Holding());
  driver_->set_generation("g2");
  const auto t0 = Clock::now();
  auto sb = pool_->Take("pooled", digest_, false);
  const auto waited = Clock::now() - t0;
  tend_gate_.Open();
  ASSERT_NE(sb, nullptr) << "the run waited for the eviction of the stale sandboxes";
  EXPECT_EQ(sb->generation(), "g2");
  EXPECT_LT(waited, std::chrono::milliseconds(1000));
  ASSERT_TRUE(WaitFor([](const PoolStats& s) { return s.evictions == 2 && s.ready == 2; }));
}

// A backend whose boot takes longer than 2 s (a microVM under TCG: 2-5 s): a run that takes the
// pool's last sandbox starts its refill, and the next run waits for that refill, as long as a
// boot of the pool's takes and more, rather than give up after 2 s and boot one of its own.
TEST_F(SandboxPoolTest, ARunWaitsForASlowBackendsRefillAsLongAsABootTakes) {
  StartPool(std::chrono::milliseconds(2500), 1);
  ASSERT_TRUE(WaitFor([](const PoolStats& s) { return s.ready == 1; }));
  ASSERT_NE(pool_->Take("pooled", digest_, false), nullptr);
  EXPECT_NE(pool_->Take("pooled", digest_, false), nullptr)
      << "the run gave up on the refill before a boot's time";
  const PoolStats s = pool_->stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 0u);
}

// One sandbox is booting and none is ready: one run waits for it (it comes sooner than a boot of
// its own), the others do not wait in line behind it and make their own at once.
TEST_F(SandboxPoolTest, OnlyAsManyRunsWaitAsSandboxesAreComing) {
  StartPool(std::chrono::milliseconds(1500), 1);
  ASSERT_TRUE(WaitFor([](const PoolStats& s) { return s.ready == 1; }));
  ASSERT_NE(pool_->Take("pooled", digest_, false), nullptr);
  ASSERT_TRUE(WaitFor([](const PoolStats& s) { return s.booting == 1; }));
  struct Taken {
    bool got;
    std::chrono::milliseconds waited;
  };
  std::vector<std::future<Taken>> takes;
  for (int i = 0; i < 3; ++i) {
    takes.push_back(std::async(std::launch::async, [this] {
      const auto t0 = Clock::now();
      bool got = pool_->Take("pooled", digest_, false) != nullptr;
      return Taken{got, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0)};
    }));
  }
  int got = 0;
  for (auto& f : takes) {
    Taken t = f.get();
    if (t.got) {
      ++got;
    } else {
      EXPECT_LT(t.waited, std::chrono::milliseconds(1000)) << "a run waited in line for the pool";
    }
  }
  EXPECT_EQ(got, 1);
  const PoolStats s = pool_->stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 2u);
}

// While the pool still has a sandbox ready for the next run, the refill of the one a run took
// begins only SandboxPool::kRunStartQuiet after the run began, off the program's start.
TEST_F(SandboxPoolTest, ARefillKeepsOffTheStartOfTheRunThatTookASandbox) {
  EXPECT_GE(RefillBeganAfterTake(2), SandboxPool::kRunStartQuiet);
}

// A pool that a run left empty is refilled at once: the next run would otherwise find nothing
// (a stream of runs drains the pool, and holding its boots back would cost them hits).
TEST_F(SandboxPoolTest, ThePoolARunEmptiedIsRefilledAtOnce) {
  const Clock::duration began = RefillBeganAfterTake(1);
  EXPECT_GE(began, Clock::duration::zero());
  EXPECT_LT(began, SandboxPool::kRunStartQuiet);
}

// A run that finds the pool empty and waits for the sandbox coming is not kept waiting by that
// window: the boot begins at once.
TEST_F(SandboxPoolTest, ABootARunWaitsForIsNotHeldBack) {
  StartPool(std::chrono::milliseconds(100), 1);
  ASSERT_TRUE(WaitFor([](const PoolStats& s) { return s.ready == 1; }));
  const auto taken = Clock::now();
  ASSERT_NE(pool_->Take("pooled", digest_, false), nullptr);
  EXPECT_NE(pool_->Take("pooled", digest_, false), nullptr);  // waits for the refill
  const std::vector<Clock::time_point> starts = driver_->starts();
  ASSERT_GE(starts.size(), 2u);
  EXPECT_LT(starts[1] - taken, SandboxPool::kRunStartQuiet);
  EXPECT_EQ(pool_->stats().hits, 2u);
}

// A boot is held back once, not for as long as runs keep starting: with a run beginning every
// 10 ms (of a policy without a pool) the refill still comes, within the window and its boot.
TEST_F(SandboxPoolTest, RunsStartingWithoutPauseDoNotStarveTheRefills) {
  StartPool(std::chrono::milliseconds(20), 2);
  ASSERT_TRUE(WaitFor([](const PoolStats& s) { return s.ready == 2; }));
  const auto taken = Clock::now();
  ASSERT_NE(pool_->Take("pooled", digest_, false), nullptr);
  std::atomic<bool> done{false};
  std::thread runs([&] {
    while (!done.load()) {
      EXPECT_EQ(pool_->Take("not-pooled", digest_, false), nullptr);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  const bool refilled = WaitFor([](const PoolStats& s) { return s.ready == 2; });
  const auto took = Clock::now() - taken;
  done.store(true);
  runs.join();
  ASSERT_TRUE(refilled);
  EXPECT_LT(took, std::chrono::seconds(2)) << "the refill waited for the runs to pause";
}

// A run with input files gets nothing from a pool whose sandboxes cannot take input (neither a
// hit nor a miss, no wait), and the ready sandbox stays for the next run without.
TEST_F(SandboxPoolTest, ARunWithInputSkipsAPoolWhoseSandboxesCannotTakeIt) {
  StartPool(std::chrono::milliseconds(10), 1, /*takes_input=*/false);
  ASSERT_TRUE(WaitFor([](const PoolStats& s) { return s.ready == 1; }));
  EXPECT_EQ(pool_->Take("pooled", digest_, /*with_input=*/true), nullptr);
  PoolStats s = pool_->stats();
  EXPECT_EQ(s.ready, 1u);
  EXPECT_EQ(s.hits + s.misses, 0u);
  EXPECT_NE(pool_->Take("pooled", digest_, /*with_input=*/false), nullptr);
  EXPECT_EQ(pool_->stats().hits, 1u);
}

// The budget counts what the backend says a waiting sandbox holds (a microVM: its guest RAM and
// VMM allowance), not the program's share alone: with 1 GiB per sandbox and a 2.5 GiB budget, a
// pool of 4 keeps 2.
TEST_F(SandboxPoolTest, TheMemoryBudgetCountsWhatEachSandboxHolds) {
  StartPool(std::chrono::milliseconds(10), 4, true, 1ull << 30, 5ull << 29);
  ASSERT_TRUE(WaitFor([](const PoolStats& s) { return s.ready == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // two more tending passes
  EXPECT_EQ(pool_->stats().ready, 2u);
  EXPECT_EQ(driver_->boots.load(), 2);
}

// Crash recovery ends the pooled sandboxes of a service that is gone, never of one alive (another
// service sharing the audit log): this process made something a moment ago and is alive; a pid
// that started after the moment, or none at all, is gone.
TEST(MakerGoneTest, OnlyAMakerThatIsStillTheSameProcessIsAlive) {
  const int64_t now = audit::NowNs();
  EXPECT_FALSE(MakerGone(static_cast<int32_t>(getpid()), now));
  EXPECT_TRUE(MakerGone(static_cast<int32_t>(getpid()), 1'000'000'000))
      << "this process started long after 1970: the maker of then was another";
  EXPECT_TRUE(MakerGone(0x7ffffff0, now)) << "no such process";
  EXPECT_TRUE(MakerGone(std::nullopt, now));
}

}  // namespace
}  // namespace safex::serve
