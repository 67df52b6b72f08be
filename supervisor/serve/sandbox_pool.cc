#include "supervisor/serve/sandbox_pool.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "audit/audit_log.h"
#include "audit/time_format.h"
#include "supervisor/serve/service_log.h"

namespace safex::serve {
namespace {

using audit::NowNs;

// How often the pools are tended when nothing wakes their threads (idle ages, dead sandboxes).
constexpr auto kTendInterval = std::chrono::milliseconds(500);
// How long a run waits at least, and at most, for a sandbox of its plan that is booting when
// none is ready (TakeWait).
constexpr std::chrono::nanoseconds kTakeWait = std::chrono::milliseconds(2000);
constexpr std::chrono::nanoseconds kMaxTakeWait = std::chrono::seconds(30);
// After a failed boot a pool waits this long, doubled per failure in a row up to kMaxBackoff.
constexpr int64_t kFirstBackoffNs = 1'000'000'000;
constexpr int64_t kMaxBackoffNs = 60'000'000'000;

// Whether a waiting sandbox was made from `digest` in `generation`: one of another plan or
// generation is never handed out, and is the tending thread's to evict.
bool IsCurrent(const drivers::PreparedSandbox& sb, const std::string& digest,
               const std::string& generation) {
  return sb.plan_digest() == digest && sb.generation() == generation;
}

// The first of a pool's ready sandboxes made from `digest` in `generation` (and taking input if
// `with_input`). For Take and HasReady alike.
template <typename ReadySandboxes>
auto FindReady(ReadySandboxes& ready, const std::string& digest, const std::string& generation,
               bool with_input) {
  return std::find_if(ready.begin(), ready.end(), [&](const auto& sb) {
    return IsCurrent(*sb, digest, generation) && (!with_input || sb->TakesInput());
  });
}

}  // namespace

std::string RenderPoolMetrics(const PoolStats& s) {
  std::string out;
  auto metric = [&out](const char* name, const char* type, const char* help, uint64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, v);
  };
  out +=
      "# HELP safex_pool_ready Pooled sandboxes waiting for a run, per pooled policy.\n"
      "# TYPE safex_pool_ready gauge\n";
  for (const auto& [policy, n] : s.ready_by_policy) {
    out += fmt::format("safex_pool_ready{{policy=\"{}\"}} {}\n", policy, n);
  }
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
                         drivers::Backends* backends, PlanResolver resolve, SandboxRecorder record)
    : backends_(backends),
      resolve_(std::move(resolve)),
      record_(std::move(record)),
      memory_budget_(memory_budget) {
  for (compiler::PoolRule& r : rules) {
    const std::string name = r.policy;
    pools_[name].rule = std::move(r);
  }
}

SandboxPool::~SandboxPool() { Stop(); }

void SandboxPool::Start() {
  if (pools_.empty()) return;
  threads_.emplace_back([this] { TendLoop(); });
  // As many boots at once as there are CPUs (at most 4): they run at a low CPU share, so they
  // take what running sandboxes leave, and a burst of runs is refilled in parallel.
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (long i = 0; i < std::clamp<long>(cpus, 1, 4); ++i) {
    threads_.emplace_back([this] { BootLoop(); });
  }
}

void SandboxPool::Stop() {
  stopping_.store(1);
  wake_.notify_all();
  ready_cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  std::vector<Eviction> gone;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [name, pool] : pools_) {
      for (auto& sb : pool.ready) gone.push_back({std::move(sb), name, "the service stopped"});
      pool.ready.clear();
    }
  }
  Evict(std::move(gone));  // the pool's threads have ended
}

void SandboxPool::Evict(std::vector<Eviction> gone) {
  for (Eviction& e : gone) {
    audit::SandboxEvent ev;
    ev.sandbox_id = e.sandbox->id();
    ev.what = audit::SandboxEvent::What::kEvicted;
    ev.requester.pid = getpid();
    ev.policy_name = e.policy;
    ev.plan_digest = e.sandbox->plan_digest();
    ev.reason = e.reason;
    if (Status st = Record(ev); !st.ok()) {
      ServeError(fmt::format("pool {}: the eviction of sandbox {} could not be recorded: {}",
                             e.policy, ev.sandbox_id, st.message()));
    }
    e.sandbox.reset();  // torn down now, outside the lock
  }
  std::lock_guard<std::mutex> l(mu_);
  stats_.evictions += gone.size();
}

Status SandboxPool::Record(const audit::SandboxEvent& ev) {
  std::lock_guard<std::mutex> l(record_mu_);  // one audit log connection, several threads
  return record_(ev);
}

bool SandboxPool::RecordMade(const drivers::PreparedSandbox& sb,
                             const supervisor::PreparedPlan& plan, const std::string& policy) {
  audit::SandboxEvent ev;
  ev.sandbox_id = sb.id();
  ev.what = audit::SandboxEvent::What::kMade;
  ev.requester.pid = getpid();
  ev.policy_name = policy;
  ev.plan_digest = sb.plan_digest();
  ev.backend = plan::BackendName(plan.plan.backend);
  ev.backend_mode = plan.plan.backend == plan::Backend::kGvisor ? plan.plan.gvisor.platform : "";
  ev.enforcement = supervisor::EnforcementToJson(sb.enforcement()).dump();
  if (Status st = Record(ev); !st.ok()) {
    ServeError(fmt::format("pool {}: sandbox {} could not be recorded, so it is not used: {}",
                           policy, sb.id(), st.message()));
    return false;
  }
  return true;
}

std::unique_ptr<drivers::PreparedSandbox> SandboxPool::Take(const std::string& policy_name,
                                                            const std::string& plan_digest,
                                                            bool with_input) {
  const std::optional<std::string> generation = GenerationNow(policy_name);
  std::unique_ptr<drivers::PreparedSandbox> found;
  {
    std::unique_lock<std::mutex> l(mu_);
    last_run_start_ = std::chrono::steady_clock::now();  // any run, pooled or not
    auto it = pools_.find(policy_name);
    if (it == pools_.end()) return nullptr;  // not a pooled policy: neither hit nor miss
    Pool& pool = it->second;
    // The runtime or a bound path changed since the last tending pass: the sandboxes made before
    // are not handed out (PopReady), and the tending thread, woken below, evicts them.
    if (generation) pool.generation = *generation;
    // A backend whose pooled sandboxes cannot take input (microVM): neither hit nor miss.
    if (with_input && !pool.takes_input) return nullptr;
    const auto until = std::chrono::steady_clock::now() + TakeWait(pool);
    // None ready, but one of this plan is booting or about to (the pool is below its size): it
    // is ready sooner than a sandbox of the run's own would be (a whole boot), so the run waits
    // for it, within TakeWait, unless as many runs already wait as sandboxes are coming.
    ++pool.waiting;
    while (!(found = PopReady(pool, plan_digest, with_input)) &&
           pool.waiting <= SandboxesComing(pool) && pool.digest == plan_digest &&
           stopping_.load() == 0) {
      wake_.notify_all();  // a boot held back off this run's start must not keep it waiting
      if (ready_cv_.wait_until(l, until) == std::cv_status::timeout) {
        found = PopReady(pool, plan_digest, with_input);
        break;
      }
    }
    --pool.waiting;
    ++(found ? stats_.hits : stats_.misses);
  }
  wake_.notify_all();  // a pool just shrank, or holds a stale sandbox: tend it
  return found;
}

// A waiting sandbox of an old plan or generation does not count as the pool being full: a boot
// thread replaces it at once (NextToFill counts the same way) while the tending thread, woken by
// Take, evicts it. After a runsc upgrade the first run waits for that boot rather than make a
// second one beside it. Its memory still counts until it is gone.
uint32_t SandboxPool::SandboxesComing(const Pool& pool) const {
  if (pool.booting > 0) return pool.booting;
  const bool refill = CurrentReady(pool) < pool.rule.size && NowNs() >= pool.retry_after_ns &&
                      MemoryInUse() + pool.memory_bytes <= memory_budget_;
  return refill ? 1 : 0;
}

size_t SandboxPool::CurrentReady(const Pool& pool) {
  return static_cast<size_t>(
      std::count_if(pool.ready.begin(), pool.ready.end(),
                    [&](const auto& sb) { return IsCurrent(*sb, pool.digest, pool.generation); }));
}

// The sandbox a run waits for may have begun booting just now, and a boot of the run's own would
// take as long: so a run waits up to half as long again as the pool's last boot took (a microVM
// under TCG boots in 2-5 s), and never less than kTakeWait. A fixed 2 s made a run beside a
// refilling microVM pool give up and then boot its own: a whole boot later, both boots slower
// for sharing the CPUs.
std::chrono::nanoseconds SandboxPool::TakeWait(const Pool& pool) {
  return std::clamp(pool.last_boot * 3 / 2, kTakeWait, kMaxTakeWait);
}

std::unique_ptr<drivers::PreparedSandbox> SandboxPool::PopReady(Pool& pool,
                                                                const std::string& digest,
                                                                bool with_input) {
  auto sb = FindReady(pool.ready, digest, pool.generation, with_input);
  if (sb == pool.ready.end()) return nullptr;
  std::unique_ptr<drivers::PreparedSandbox> found = std::move(*sb);
  pool.ready.erase(sb);
  return found;
}

bool SandboxPool::HasReady(const std::string& policy_name, const std::string& plan_digest,
                           bool with_input) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = pools_.find(policy_name);
  if (it == pools_.end()) return false;
  const Pool& pool = it->second;
  return FindReady(pool.ready, plan_digest, pool.generation, with_input) != pool.ready.end();
}

// Not under mu_: a few stat calls (Driver::SandboxGeneration) on every run's way in.
std::optional<std::string> SandboxPool::GenerationNow(const std::string& policy_name) {
  std::shared_ptr<const supervisor::PreparedPlan> plan;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = plans_.find(policy_name);
    if (it == plans_.end()) return std::nullopt;
    plan = it->second;
  }
  auto driver = backends_->Get(plan->plan.backend);
  if (!driver.ok()) return std::nullopt;
  return (*driver)->SandboxGeneration(plan->plan);
}

PoolStats SandboxPool::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  PoolStats s = stats_;
  s.ready = 0;
  s.booting = 0;
  for (const auto& [name, pool] : pools_) {
    s.ready += pool.ready.size();
    s.ready_by_policy[name] = pool.ready.size();
    s.booting += pool.booting;
  }
  return s;
}

void SandboxPool::TendLoop() {
  while (stopping_.load() == 0) {
    Tend();
    wake_.notify_all();  // the plans may have changed: the boot threads look again
    std::unique_lock<std::mutex> l(mu_);
    if (stopping_.load() != 0) break;
    wake_.wait_for(l, kTendInterval);
  }
}

void SandboxPool::BootLoop() {
  for (;;) {
    Pool* next = nullptr;
    std::shared_ptr<const supervisor::PreparedPlan> plan;
    {
      std::unique_lock<std::mutex> l(mu_);
      // Timed: a pool's backoff after a failed boot ends without anything waking us.
      wake_.wait_for(l, kTendInterval,
                     [this] { return stopping_.load() != 0 || NextToFill() != nullptr; });
      if (stopping_.load() != 0) return;
      next = NextToFill();
      if (next == nullptr) continue;
      ++next->booting;  // from now on a run that finds the pool empty waits for this boot
      plan = plans_[next->rule.policy];
      // Off the start of the last run (kRunStartQuiet) while the pool still has one ready for the
      // next run; at once when it has none, or a run already waits for it.
      wake_.wait_until(l, last_run_start_ + kRunStartQuiet, [this, next] {
        return stopping_.load() != 0 || next->waiting > 0 || CurrentReady(*next) == 0;
      });
      if (stopping_.load() != 0) {
        --next->booting;
        return;
      }
    }
    Boot(*next, std::move(plan));
  }
}

// The order matters: the plans first (a changed policy must retire its sandboxes before any is
// handed out again), then what must go; the boot threads fill what is missing.
void SandboxPool::Tend() {
  for (auto& [name, unused] : pools_) {  // the set of pools never changes after construction
    auto plan = resolve_(name);
    std::string generation;
    uint64_t memory = 0;
    if (plan.ok()) {
      memory = (*plan)->plan.limits.memory_bytes;
      if (auto driver = backends_->Get((*plan)->plan.backend); driver.ok()) {
        generation = (*driver)->SandboxGeneration((*plan)->plan);
        memory = (*driver)->SandboxMemoryBytes((*plan)->plan);
      }
    }
    std::lock_guard<std::mutex> l(mu_);
    Pool& pool = pools_.at(name);
    const std::string digest = plan.ok() ? (*plan)->digest : "";
    // Said once per change, including a policy that has not compiled since the start (its
    // digest stays "", as the pool's was).
    const std::string unresolved = plan.ok() ? "" : plan.status().message();
    if (digest != pool.digest || unresolved != pool.unresolved) {
      if (plan.ok()) {
        ServeLog(fmt::format("pool {}: filled from plan {}", name, digest));
      } else {
        ServeWarn(fmt::format("pool {}: not filled: {}", name, unresolved));
      }
      pool.retry_after_ns = 0;
      pool.failures = 0;
    }
    pool.digest = digest;
    pool.unresolved = unresolved;
    pool.generation = generation;
    if (plan.ok()) {
      pool.memory_bytes = memory;
      plans_[name] = *plan;
    }
  }
  std::vector<Eviction> gone;
  {
    std::lock_guard<std::mutex> l(mu_);
    const int64_t now = NowNs();
    for (auto& [name, pool] : pools_) Expired(pool, now, &gone);
  }
  Evict(std::move(gone));
}

void SandboxPool::Expired(Pool& pool, int64_t now_ns, std::vector<Eviction>* out) {
  std::deque<std::unique_ptr<drivers::PreparedSandbox>> keep;
  for (auto& sb : pool.ready) {
    std::string why;
    if (sb->plan_digest() != pool.digest) {
      why = "the policy's plan changed";
    } else if (sb->generation() != pool.generation) {
      why = "the runtime or a bound host path changed";
    } else if (now_ns - sb->created_ns() > static_cast<int64_t>(pool.rule.max_idle_ns)) {
      why = fmt::format("idle longer than max_idle ({} s)", pool.rule.max_idle_ns / 1'000'000'000);
    } else if (!sb->Healthy()) {
      why = "its runtime exited while it waited";
    }
    if (why.empty()) {
      keep.push_back(std::move(sb));
    } else {
      out->push_back({std::move(sb), pool.rule.policy, std::move(why)});
    }
  }
  pool.ready = std::move(keep);
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
  size_t best_have = 0;
  for (auto& [name, pool] : pools_) {
    const size_t have = CurrentReady(pool) + pool.booting;
    if (pool.digest.empty() || have >= pool.rule.size || now < pool.retry_after_ns) continue;
    if (MemoryInUse() + pool.memory_bytes > memory_budget_) {
      if (!pool.over_budget_logged) {
        ServeWarn(fmt::format("pool {}: kept at {} of {}: pool_memory ({} bytes) is used up", name,
                              have, pool.rule.size, memory_budget_));
        pool.over_budget_logged = true;
      }
      continue;
    }
    if (best == nullptr || have < best_have) {
      best = &pool;
      best_have = have;
    }
  }
  return best;
}

void SandboxPool::Boot(Pool& pool, std::shared_ptr<const supervisor::PreparedPlan> plan) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<drivers::PreparedSandbox>> made =
      Status::Unavailable("no backend for the plan");
  if (auto driver = backends_->Get(plan->plan.backend); driver.ok()) {
    drivers::PrepareRequest req;
    req.sandbox_id = "sbx-" + audit::NewRunId();
    req.cancel = &stopping_;
    req.plan_digest = plan->digest;
    made = (*driver)->Prepare(plan->plan, req);
  } else {
    made = driver.status();
  }
  // Recorded before it can be handed out; one that cannot be recorded is never pooled.
  const bool recorded = made.ok() && RecordMade(**made, *plan, pool.rule.policy);
  std::vector<Eviction> late;  // made for a plan no longer wanted
  {
    std::lock_guard<std::mutex> l(mu_);
    --pool.booting;
    if (made.ok() && !recorded) {
      ++stats_.failures;
      pool.retry_after_ns = NowNs() + kFirstBackoffNs;
      ready_cv_.notify_all();
      return;  // `made` is destroyed on the way out: nothing of it was ever handed out
    }
    if (!made.ok()) {
      ++stats_.failures;
      const int64_t backoff =
          std::min(kMaxBackoffNs, kFirstBackoffNs << std::min<uint32_t>(pool.failures, 6));
      pool.retry_after_ns = NowNs() + backoff;
      // (A boot the stop cancelled is not worth a warning.)
      if (pool.failures++ == 0 && stopping_.load() == 0) {
        ServeWarn(fmt::format("pool {}: a sandbox could not be made: {}", pool.rule.policy,
                              made.status().message()));
      }
      ready_cv_.notify_all();
      return;
    }
    pool.failures = 0;
    pool.last_boot = std::chrono::steady_clock::now() - t0;
    ++stats_.refills;
    if (stopping_.load() != 0 || (*made)->plan_digest() != pool.digest ||
        (*made)->generation() != pool.generation) {
      late.push_back({std::move(made).value(), pool.rule.policy,
                      stopping_.load() != 0 ? "the service stopped"
                                            : "made for a plan that is no longer current"});
    } else {
      pool.takes_input = (*made)->TakesInput();
      pool.ready.push_back(std::move(made).value());
    }
  }
  ready_cv_.notify_all();  // a run may be waiting for this boot (Take)
  Evict(std::move(late));
}

}  // namespace safex::serve
