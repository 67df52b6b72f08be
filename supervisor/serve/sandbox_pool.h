// The warm pool (`service { pool "NAME" { size = N  max_idle = 10m } }`, docs/operating.md):
// sandboxes booted ahead of demand from a policy's current plan, each handed to exactly one run
// and destroyed when it ends (drivers/driver.h, PreparedSandbox). Nothing is ever reused or
// cloned: a pooled sandbox is made by the same steps as a cold run's, and until its hand-over
// nothing of any request is in it.
//
// One tending thread resolves each pooled policy through the policy store every half second (a
// changed policy or host config gives a new plan digest: the sandboxes of the old one are
// destroyed, never handed out), checks every waiting sandbox (Healthy: one whose runtime died is
// destroyed, and so is one whose generation -- runsc's binary, the bound host paths,
// Driver::SandboxGeneration -- changed) and replaces those older than max_idle. Boot threads (as
// many as CPUs, at most 4) make what is missing, never on a request's path. Take (a worker, for
// a run) only pops a ready one. A boot also keeps off the start of a run beside it: while the
// pool has one ready, it begins only kRunStartQuiet after the last run began.
//
// Audit: every sandbox made is a chained `sandbox` event (its plan, what it enforced) committed
// before it can be handed out (one that cannot be recorded is destroyed, never pooled); every
// one destroyed unused is an eviction event with the reason. One that served a run is named by
// that run's evidence instead. Events are written by the pool's threads one at a time (and by
// Stop once they ended), on the pool's own audit log connection.
//
// Budget: the memory limits of all pooled sandboxes, ready or booting, stay within
// pool_memory; a pool that would pass it is kept smaller (logged once).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "audit/records.h"
#include "common/status.h"
#include "compiler/host_config.h"
#include "drivers/backends.h"
#include "drivers/driver.h"
#include "supervisor/runner.h"

namespace safex::serve {

// The plan a pool is filled from now (the policy store's Get).
using PlanResolver =
    std::function<Result<std::shared_ptr<const supervisor::PreparedPlan>>(const std::string&)>;
// Commits one sandbox event to the audit log.
using SandboxRecorder = std::function<Status(const audit::SandboxEvent&)>;

struct PoolStats {
  std::map<std::string, uint64_t> ready_by_policy;  // waiting, per pooled policy
  uint64_t ready = 0;                               // waiting, across every pool
  uint64_t booting = 0;                             // being made now
  uint64_t hits = 0;                                // runs handed a pooled sandbox
  uint64_t misses = 0;                              // runs of a pooled policy that found none ready
  uint64_t refills = 0;                             // sandboxes made
  uint64_t evictions = 0;  // destroyed unused (max_idle, plan change, died, stop)
  uint64_t failures = 0;   // boots that failed
};

// The pool's counters in the Prometheus text format (appended to GET /metrics):
// safex_pool_ready{policy}, safex_pool_booting, safex_pool_hits_total, safex_pool_misses_total,
// safex_pool_refills_total, safex_pool_evictions_total, safex_pool_boot_failures_total.
std::string RenderPoolMetrics(const PoolStats& stats);

class SandboxPool : public supervisor::SandboxSource {
 public:
  // A boot begins no sooner than this after the last run began (the last Take). A boot's first
  // tens of milliseconds on the host (runsc's own start, its gofer, the namespaces, cgroups and
  // mounts) slow a program starting beside it, even at the boot's low CPU share: a pooled
  // `/bin/echo`'s first byte came 2-7 ms later with refills starting at once (docs/benchmarks.md,
  // "Refills keep off a run's start"). Only a pool that still has a sandbox ready for the next
  // run holds a boot back: the boot for an empty pool, or one a run waits for, begins at once
  // (under a stream of runs the pool drains and its boots are not slowed). Each boot is held
  // back at most once, so runs starting without pause never starve the pool.
  static constexpr std::chrono::milliseconds kRunStartQuiet{50};

  SandboxPool(std::vector<compiler::PoolRule> rules, uint64_t memory_budget,
              drivers::Backends* backends, PlanResolver resolve, SandboxRecorder record);
  ~SandboxPool() override;  // Stop()

  void Start();  // the tending thread and the boot threads
  // Ends the pool's threads (a boot in progress is cancelled), then destroys every waiting
  // sandbox.
  void Stop();

  // A ready sandbox made from exactly that plan, by the runtime and from the bound paths as they
  // are now (Driver::SandboxGeneration, checked at the take, not only at the last tending pass);
  // the others are skipped (the tending thread evicts them), never handed out. When none is ready
  // but one of that plan is booting, waits for it (up to half as long again as the pool's last
  // boot took, at least 2 s): it comes sooner than a boot of the run's own would. Only as many runs
  // wait as sandboxes are coming; the others boot their own at once (under load, waiting in line
  // for the pool's boots would cap the service at the pool's boot rate). A run `with_input` gets
  // nothing from a pool whose sandboxes cannot take input (TakesInput).
  std::unique_ptr<drivers::PreparedSandbox> Take(const std::string& policy_name,
                                                 const std::string& plan_digest,
                                                 bool with_input) override;
  bool HasReady(const std::string& policy_name, const std::string& plan_digest,
                bool with_input) const override;

  PoolStats stats() const;

 private:
  struct Pool {
    compiler::PoolRule rule;
    std::string digest;         // the plan the pool is filled from ("" : none)
    std::string unresolved;     // why there is none ("" : there is one)
    std::string generation;     // Driver::SandboxGeneration of that plan, now
    uint64_t memory_bytes = 0;  // what each sandbox may hold (Driver::SandboxMemoryBytes)
    std::deque<std::unique_ptr<drivers::PreparedSandbox>> ready;
    uint32_t booting = 0;
    uint32_t waiting = 0;     // runs in Take waiting for one of the sandboxes coming
    bool takes_input = true;  // what its last sandbox made said (PreparedSandbox::TakesInput)
    bool over_budget_logged = false;
    uint32_t failures = 0;                  // failed boots in a row
    std::chrono::nanoseconds last_boot{0};  // how long the last sandbox made took (Prepare)
    int64_t retry_after_ns = 0;             // no boot before this after a failure (backoff)
  };

  // How many sandboxes of `pool` are coming without a run making its own: those booting, or one
  // as soon as a boot thread looks (fewer waiting of the current plan and generation than its
  // size, not backing off, within the budget). REQUIRES mu_.
  uint32_t SandboxesComing(const Pool& pool) const;
  // How many of `pool`'s waiting sandboxes are of its current plan and generation: only those
  // fill it (SandboxesComing and NextToFill count alike). REQUIRES mu_.
  static size_t CurrentReady(const Pool& pool);
  // How long a run waits in Take for a sandbox of `pool` that is coming.
  static std::chrono::nanoseconds TakeWait(const Pool& pool);
  // What Driver::SandboxGeneration says now of the plan the pool of `policy_name` is filled
  // from; nullopt before it has one (or without its backend).
  std::optional<std::string> GenerationNow(const std::string& policy_name);
  // The first ready sandbox of `pool` made from `digest` in the pool's generation (one that takes
  // input if `with_input`), taken out. REQUIRES mu_.
  std::unique_ptr<drivers::PreparedSandbox> PopReady(Pool& pool, const std::string& digest,
                                                     bool with_input);
  void TendLoop();
  void BootLoop();
  // One pass: plans resolved, sandboxes checked and evicted.
  void Tend();
  Status Record(const audit::SandboxEvent& ev);  // record_, one call at a time
  // An unused sandbox on its way out, and why.
  struct Eviction {
    std::unique_ptr<drivers::PreparedSandbox> sandbox;
    std::string policy;
    std::string reason;
  };
  // Unused sandboxes of `pool` that must go (wrong plan, too old, dead), taken out under mu_.
  void Expired(Pool& pool, int64_t now_ns, std::vector<Eviction>* out);
  // Records each eviction and destroys the sandbox (outside mu_).
  void Evict(std::vector<Eviction> gone);
  // The made event of a new sandbox; false (and logged) when it could not be recorded.
  bool RecordMade(const drivers::PreparedSandbox& sb, const supervisor::PreparedPlan& plan,
                  const std::string& policy);
  // The pool that most needs a sandbox and may have one within the budget; nullptr: none.
  // A stale waiting sandbox does not count as filling its pool (CurrentReady): its replacement
  // boots before the tending pass evicts it. Its memory counts until it is gone.
  Pool* NextToFill();
  void Boot(Pool& pool, std::shared_ptr<const supervisor::PreparedPlan> plan);
  uint64_t MemoryInUse() const;  // REQUIRES mu_

  drivers::Backends* backends_;
  PlanResolver resolve_;
  SandboxRecorder record_;
  const uint64_t memory_budget_;
  std::atomic<int> stopping_{0};
  mutable std::mutex mu_;
  std::condition_variable wake_;       // the pool's threads: something to tend or to boot
  std::condition_variable ready_cv_;   // Take: a boot ended
  std::map<std::string, Pool> pools_;  // by policy name; guarded by mu_
  std::map<std::string, std::shared_ptr<const supervisor::PreparedPlan>> plans_;  // guarded by mu_
  PoolStats stats_;                                                               // guarded
  std::chrono::steady_clock::time_point last_run_start_;  // the last Take; guarded by mu_
  std::mutex record_mu_;
  std::vector<std::thread> threads_;  // TendLoop, then the BootLoops
};

}  // namespace safex::serve
