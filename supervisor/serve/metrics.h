// The daemon's counters, rendered in the Prometheus text format (GET /metrics):
//   safex_runs_started_total, safex_runs_finished_total{verdict}, safex_requests_refused_total
//   {reason}, safex_queue_depth, safex_runs_in_flight, safex_connections_open,
//   safex_run_duration_seconds (histogram), safex_recovered_runs_total, safex_policy_compilations,
//   and with audit_ship_to: safex_audit_ship_lag_events, safex_audit_ship_last_success_seconds,
//   safex_audit_shipped_events_total, safex_audit_ship_failures_total.
// Updated from any thread (atomics); Render() takes a consistent-enough snapshot.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "audit/verdict.h"

namespace safex::serve {

// Why a request was refused (one label value each).
enum class RefusalReason {
  kBadRequest,     // malformed HTTP, JSON, fields, limits (4xx)
  kForbidden,      // the caller may not use that policy
  kUnknownPolicy,  // no such policy
  kBusy,           // queue full
  kShuttingDown,   // draining
  kConnections,    // too many open connections
  kTimeout,        // the request did not arrive in time
  kPolicy,         // the policy or plan was refused (does not compile, exceeds ceilings, ...)
  kCancelled,      // an admitted run cancelled before it started (DELETE, its client gone)
};
inline constexpr size_t kRefusalReasons = 9;
const char* RefusalReasonName(RefusalReason r);

// What /metrics shows of the audit shipper (audit_shipper.h), when the host config names a
// central database.
struct ShipMetrics {
  std::atomic<bool> enabled{false};
  std::atomic<int64_t> lag_events{0};       // node events the central does not hold yet
  std::atomic<int64_t> last_success_ns{0};  // when a ship last completed (unix ns; 0: never)
  std::atomic<uint64_t> shipped_events{0};  // events shipped since the service started
  std::atomic<uint64_t> failures{0};        // ships that failed (or warned)
};

class Metrics {
 public:
  static constexpr std::array<double, 10> kBuckets = {0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600};

  void RunStarted() { started_.fetch_add(1, std::memory_order_relaxed); }
  void RunFinished(audit::Verdict v, double seconds);
  void Refused(RefusalReason r) {
    refused_[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed);
  }
  void SetRecovered(uint64_t n) { recovered_.store(n); }

  std::atomic<int64_t> queue_depth{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> connections{0};
  std::atomic<uint64_t> policy_compilations{0};
  // Refusals counted into a summary instead of being recorded one by one (refusal_limiter.h),
  // summaries written, and refusals that could not be recorded at all (answered 500).
  std::atomic<uint64_t> refusals_summarised{0};
  std::atomic<uint64_t> refusal_summaries{0};
  std::atomic<uint64_t> refusals_unrecorded{0};
  std::atomic<int64_t> buffered_bytes{0};
  std::atomic<uint64_t> sessions_opened{0};  // agent sessions opened (session_table.h)
  std::atomic<int64_t> sessions_live{0};     // set when rendered
  ShipMetrics ship;

  std::string Render() const;

 private:
  std::atomic<uint64_t> started_{0};
  std::array<std::atomic<uint64_t>, 16> finished_{};  // by verdict (enum order)
  std::array<std::atomic<uint64_t>, kRefusalReasons> refused_{};
  std::array<std::atomic<uint64_t>, kBuckets.size()> buckets_{};  // non-cumulative counts
  std::atomic<uint64_t> duration_count_{0};
  std::atomic<uint64_t> duration_micros_{0};
  std::atomic<uint64_t> recovered_{0};
};

}  // namespace safex::serve
