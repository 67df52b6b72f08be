#include "supervisor/serve/metrics.h"

#include <cstdio>

namespace safex::serve {

const char* RefusalReasonName(RefusalReason r) {
  switch (r) {
    case RefusalReason::kBadRequest:
      return "bad_request";
    case RefusalReason::kForbidden:
      return "forbidden";
    case RefusalReason::kUnknownPolicy:
      return "unknown_policy";
    case RefusalReason::kBusy:
      return "busy";
    case RefusalReason::kShuttingDown:
      return "shutting_down";
    case RefusalReason::kConnections:
      return "connections";
    case RefusalReason::kTimeout:
      return "timeout";
    case RefusalReason::kPolicy:
      return "policy";
    case RefusalReason::kCancelled:
      return "cancelled";
  }
  return "other";
}

void Metrics::RunFinished(audit::Verdict v, double seconds) {
  size_t i = static_cast<size_t>(v);
  if (i < finished_.size()) finished_[i].fetch_add(1, std::memory_order_relaxed);
  for (size_t b = 0; b < kBuckets.size(); ++b) {
    if (seconds <= kBuckets[b]) {
      buckets_[b].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  duration_count_.fetch_add(1, std::memory_order_relaxed);
  duration_micros_.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

std::string Metrics::Render() const {
  std::string out;
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  line("# HELP safex_runs_started_total Runs handed to a worker.");
  line("# TYPE safex_runs_started_total counter");
  line("safex_runs_started_total " + std::to_string(started_.load()));
  line("# HELP safex_runs_finished_total Runs that ended, by verdict.");
  line("# TYPE safex_runs_finished_total counter");
  for (const audit::VerdictInfo& vi : audit::AllVerdicts()) {
    size_t i = static_cast<size_t>(vi.verdict);
    uint64_t n = i < finished_.size() ? finished_[i].load() : 0;
    line("safex_runs_finished_total{verdict=\"" + std::string(vi.name) + "\"} " +
         std::to_string(n));
  }
  line("# HELP safex_requests_refused_total Requests refused before a run started, by reason.");
  line("# TYPE safex_requests_refused_total counter");
  for (size_t r = 0; r < kRefusalReasons; ++r) {
    line(std::string("safex_requests_refused_total{reason=\"") +
         RefusalReasonName(static_cast<RefusalReason>(r)) + "\"} " +
         std::to_string(refused_[r].load()));
  }
  line("# HELP safex_queue_depth Accepted requests waiting for a worker.");
  line("# TYPE safex_queue_depth gauge");
  line("safex_queue_depth " + std::to_string(queue_depth.load()));
  line("# HELP safex_runs_in_flight Requests being run by a worker now.");
  line("# TYPE safex_runs_in_flight gauge");
  line("safex_runs_in_flight " + std::to_string(in_flight.load()));
  line("# HELP safex_connections_open Open client connections.");
  line("# TYPE safex_connections_open gauge");
  line("safex_connections_open " + std::to_string(connections.load()));
  line("# HELP safex_recovered_runs_total Runs of dead owners closed as interrupted at start.");
  line("# TYPE safex_recovered_runs_total counter");
  line("safex_recovered_runs_total " + std::to_string(recovered_.load()));
  line("# HELP safex_policy_compilations_total Policies compiled (cache misses).");
  line("# TYPE safex_policy_compilations_total counter");
  line("safex_policy_compilations_total " + std::to_string(policy_compilations.load()));
  line(
      "# HELP safex_refusals_summarised_total Refusals over a caller's refusal rate: counted "
      "into a summary event instead of being recorded one by one.");
  line("# TYPE safex_refusals_summarised_total counter");
  line("safex_refusals_summarised_total " + std::to_string(refusals_summarised.load()));
  line("# HELP safex_refusal_summaries_total Summary events written.");
  line("# TYPE safex_refusal_summaries_total counter");
  line("safex_refusal_summaries_total " + std::to_string(refusal_summaries.load()));
  line(
      "# HELP safex_refusals_unrecorded_total Refusals the audit log could not take (answered "
      "500 and logged).");
  line("# TYPE safex_refusals_unrecorded_total counter");
  line("safex_refusals_unrecorded_total " + std::to_string(refusals_unrecorded.load()));
  line("# HELP safex_buffered_request_bytes Request bytes held in memory now.");
  line("# TYPE safex_buffered_request_bytes gauge");
  line("safex_buffered_request_bytes " + std::to_string(buffered_bytes.load()));
  line("# HELP safex_sessions_opened_total Agent sessions opened.");
  line("# TYPE safex_sessions_opened_total counter");
  line("safex_sessions_opened_total " + std::to_string(sessions_opened.load()));
  line("# HELP safex_sessions_live Agent sessions open now.");
  line("# TYPE safex_sessions_live gauge");
  line("safex_sessions_live " + std::to_string(sessions_live.load()));
  if (ship.enabled.load()) {
    line("# HELP safex_audit_ship_lag_events Audit events the central database does not hold yet.");
    line("# TYPE safex_audit_ship_lag_events gauge");
    line("safex_audit_ship_lag_events " + std::to_string(ship.lag_events.load()));
    line("# HELP safex_audit_ship_last_success_seconds When a ship last completed (unix time).");
    line("# TYPE safex_audit_ship_last_success_seconds gauge");
    line("safex_audit_ship_last_success_seconds " +
         std::to_string(ship.last_success_ns.load() / 1000000000));
    line("# HELP safex_audit_shipped_events_total Audit events shipped to the central database.");
    line("# TYPE safex_audit_shipped_events_total counter");
    line("safex_audit_shipped_events_total " + std::to_string(ship.shipped_events.load()));
    line("# HELP safex_audit_ship_failures_total Ships that failed or found the log changed.");
    line("# TYPE safex_audit_ship_failures_total counter");
    line("safex_audit_ship_failures_total " + std::to_string(ship.failures.load()));
  }
  line("# HELP safex_run_duration_seconds Wall time of a request in a worker.");
  line("# TYPE safex_run_duration_seconds histogram");
  uint64_t cumulative = 0;
  char le[32];
  for (size_t b = 0; b < kBuckets.size(); ++b) {
    cumulative += buckets_[b].load();
    std::snprintf(le, sizeof(le), "%g", kBuckets[b]);
    line(std::string("safex_run_duration_seconds_bucket{le=\"") + le + "\"} " +
         std::to_string(cumulative));
  }
  uint64_t count = duration_count_.load();
  line("safex_run_duration_seconds_bucket{le=\"+Inf\"} " + std::to_string(count));
  char sum[64];
  std::snprintf(sum, sizeof(sum), "%.6f", static_cast<double>(duration_micros_.load()) / 1e6);
  line(std::string("safex_run_duration_seconds_sum ") + sum);
  line("safex_run_duration_seconds_count " + std::to_string(count));
  return out;
}

}  // namespace safex::serve
