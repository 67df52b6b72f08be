#include "supervisor/serve/sandbox_pool.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <utility>

#include "audit/audit_log.h"
#include "supervisor/serve/service_log.h"

namespace safex::serve {
namespace {

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// How often the filler looks at the pools when nothing wakes it (idle ages, dead sandboxes).
constexpr auto kTendInterval = std::chrono::milliseconds(500);
// After a failed boot a pool waits this long, doubled per failure in a row up to kMaxBackoff.
constexpr int64_t kFirstBackoffNs = 1'000'000'000;
constexpr int64_t kMaxBackoffNs = 60'000'000'000;

}  // namespace

std::string RenderPoolMetrics(const PoolStats& s) {
  std::string out;
  auto metric = [&out](const char* name, const char* type, const char* help, uint64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, v);
  };
  metric("safex_pool_ready", "gauge", "Pooled sandboxes waiting for a run.", s.ready);
  metric("safex_pool_booting", "gauge", "Pooled sandboxes being made.", s.booting);
  metric("safex_pool_hits_total", "counter", "Runs handed a pooled sandbox.", s.hits);
  metric("safex_pool_misses_total", "counter", "Runs of a pooled policy that found none ready.",
         s.misses);
  metric("safex_pool_refills_total", "counter", "Pooled sandboxes made.", s.refills);
  metric("safex_pool_evictions_total", "counter", "Pooled sandboxes destroyed unused.",
         s.evictions);
  metric("safex_pool_boot_failures_total", "counter", "Pooled sandboxes that could not be made.",
         s.failures);
  return out;
}

SandboxPool::SandboxPool(std::vector<compiler::PoolRule> rules, uint64_t memory_budget,
                         drivers::Backends* backends, PlanResolver resolve)
    : backends_(backends), resolve_(std::move(resolve)), memory_budget_(memory_budget) {
  for (compiler::PoolRule& r : rules) {
    const std::string name = r.policy;
    pools_[name].rule = std::move(r);
  }
}

SandboxPool::~SandboxPool() { Stop(); }

void SandboxPool::Start() {
  if (pools_.empty()) return;
  filler_ = std::thread([this] { FillerLoop(); });
}

void SandboxPool::Stop() {
  stopping_.store(1);
  wake_.notify_all();
  if (filler_.joinable()) filler_.join();
  std::vector<std::unique_ptr<drivers::PreparedSandbox>> gone;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [name, pool] : pools_) {
      for (auto& sb : pool.ready) gone.push_back(std::move(sb));
      pool.ready.clear();
    }
    stats_.evictions += gone.size();
  }
  gone.clear();  // each destructor tears its sandbox down, outside the lock
}

std::unique_ptr<drivers::PreparedSandbox> SandboxPool::Take(const std::string& policy_name,
                                                            const std::string& plan_digest) {
  std::unique_ptr<drivers::PreparedSandbox> found;
  std::vector<std::unique_ptr<drivers::PreparedSandbox>> stale;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = pools_.find(policy_name);
    if (it == pools_.end()) return nullptr;  // not a pooled policy: neither hit nor miss
    Pool& pool = it->second;
    while (!pool.ready.empty() && !found) {
      std::unique_ptr<drivers::PreparedSandbox> sb = std::move(pool.ready.front());
      pool.ready.pop_front();
      if (sb->plan_digest() == plan_digest) {
        found = std::move(sb);
      } else {
        stale.push_back(std::move(sb));  // made from another plan (the policy changed since)
      }
    }
    ++(found ? stats_.hits : stats_.misses);
    stats_.evictions += stale.size();
  }
  wake_.notify_all();  // a pool just shrank: refill it
  return found;
}

PoolStats SandboxPool::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  PoolStats s = stats_;
  s.ready = 0;
  s.booting = 0;
  for (const auto& [name, pool] : pools_) {
    s.ready += pool.ready.size();
    s.booting += pool.booting;
  }
  return s;
}

void SandboxPool::FillerLoop() {
  while (stopping_.load() == 0) {
    Tend();
    std::unique_lock<std::mutex> l(mu_);
    if (stopping_.load() != 0) break;
    if (NextToFill() == nullptr) wake_.wait_for(l, kTendInterval);
  }
}

// The order matters: the plans first (a changed policy must retire its sandboxes before any is
// handed out again), then what must go, then one boot, so a pass never holds the lock long.
void SandboxPool::Tend() {
  for (auto& [name, unused] : pools_) {  // the set of pools never changes after construction
    auto plan = resolve_(name);
    std::lock_guard<std::mutex> l(mu_);
    Pool& pool = pools_.at(name);
    const std::string digest = plan.ok() ? (*plan)->digest : "";
    if (digest != pool.digest) {
      ServeLog(plan.ok() ? fmt::format("pool {}: filled from plan {}", name, digest)
                         : fmt::format("pool {}: not filled: {}", name, plan.status().message()));
      pool.retry_after_ns = 0;
      pool.failures = 0;
    }
    pool.digest = digest;
    if (plan.ok()) {
      pool.memory_bytes = (*plan)->plan.limits.memory_bytes;
      plans_[name] = *plan;
    }
  }
  std::vector<std::unique_ptr<drivers::PreparedSandbox>> gone;
  {
    std::lock_guard<std::mutex> l(mu_);
    const int64_t now = NowNs();
    for (auto& [name, pool] : pools_) {
      for (auto& sb : Expired(pool, now)) gone.push_back(std::move(sb));
    }
    stats_.evictions += gone.size();
  }
  gone.clear();
  Pool* next = nullptr;
  std::shared_ptr<const supervisor::PreparedPlan> plan;
  {
    std::lock_guard<std::mutex> l(mu_);
    next = NextToFill();
    if (next == nullptr) return;
    ++next->booting;
    plan = plans_[next->rule.policy];
  }
  Boot(*next, std::move(plan));
}

std::vector<std::unique_ptr<drivers::PreparedSandbox>> SandboxPool::Expired(Pool& pool,
                                                                            int64_t now_ns) {
  std::vector<std::unique_ptr<drivers::PreparedSandbox>> gone;
  std::deque<std::unique_ptr<drivers::PreparedSandbox>> keep;
  for (auto& sb : pool.ready) {
    const bool too_old = now_ns - sb->created_ns() > static_cast<int64_t>(pool.rule.max_idle_ns);
    if (sb->plan_digest() != pool.digest || too_old || !sb->Healthy()) {
      gone.push_back(std::move(sb));
    } else {
      keep.push_back(std::move(sb));
    }
  }
  pool.ready = std::move(keep);
  return gone;
}

uint64_t SandboxPool::MemoryInUse() const {
  uint64_t total = 0;
  for (const auto& [name, pool] : pools_) {
    total += pool.memory_bytes * (pool.ready.size() + pool.booting);
  }
  return total;
}

SandboxPool::Pool* SandboxPool::NextToFill() {
  if (stopping_.load() != 0) return nullptr;
  const int64_t now = NowNs();
  Pool* best = nullptr;
  for (auto& [name, pool] : pools_) {
    const size_t have = pool.ready.size() + pool.booting;
    if (pool.digest.empty() || have >= pool.rule.size || now < pool.retry_after_ns) continue;
    if (MemoryInUse() + pool.memory_bytes > memory_budget_) {
      if (!pool.over_budget_logged) {
        ServeWarn(fmt::format("pool {}: kept at {} of {}: pool_memory ({} bytes) is used up",
                              name, have, pool.rule.size, memory_budget_));
        pool.over_budget_logged = true;
      }
      continue;
    }
    if (best == nullptr || have < best->ready.size() + best->booting) best = &pool;
  }
  return best;
}

void SandboxPool::Boot(Pool& pool, std::shared_ptr<const supervisor::PreparedPlan> plan) {
  Result<std::unique_ptr<drivers::PreparedSandbox>> made =
      Status::Unavailable("no backend for the plan");
  if (auto driver = backends_->Get(plan->plan.backend); driver.ok()) {
    drivers::PrepareRequest req;
    req.sandbox_id = "sbx-" + audit::NewRunId();
    req.cancel = &stopping_;
    made = (*driver)->Prepare(plan->plan, req);
  } else {
    made = driver.status();
  }
  std::unique_ptr<drivers::PreparedSandbox> late;  // made for a plan no longer wanted
  {
    std::lock_guard<std::mutex> l(mu_);
    --pool.booting;
    if (!made.ok()) {
      ++stats_.failures;
      const int64_t backoff =
          std::min(kMaxBackoffNs, kFirstBackoffNs << std::min<uint32_t>(pool.failures, 6));
      pool.retry_after_ns = NowNs() + backoff;
      if (pool.failures++ == 0) {
        ServeWarn(fmt::format("pool {}: a sandbox could not be made: {}", pool.rule.policy,
                              made.status().message()));
      }
      return;
    }
    pool.failures = 0;
    ++stats_.refills;
    if (stopping_.load() != 0 || (*made)->plan_digest() != pool.digest) {
      late = std::move(made).value();
      ++stats_.evictions;
    } else {
      pool.ready.push_back(std::move(made).value());
    }
  }
}

}  // namespace safex::serve
