#include "supervisor/serve/audit_shipper.h"

#include <chrono>

#include "fleet/central.h"
#include "supervisor/serve/service_log.h"

namespace safex::serve {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<std::unique_ptr<AuditShipper>> AuditShipper::Start(const std::string& url,
                                                          const std::string& audit_db,
                                                          uint64_t interval_ns,
                                                          ShipMetrics* metrics) {
  std::unique_ptr<AuditShipper> s(new AuditShipper());
  s->url_ = url;
  s->interval_ns_ = interval_ns;
  s->metrics_ = metrics;
  audit::AuditOptions ro;
  ro.read_only = true;
  ro.create = false;
  auto log = audit::AuditLog::Open(audit_db, ro);
  if (!log.ok()) return log.status().With("opening the audit log for shipping");
  s->log_ = std::move(log).value();
  metrics->enabled.store(true);
  AuditShipper* self = s.get();
  s->thread_ = std::thread([self] { self->Loop(); });
  return s;
}

AuditShipper::~AuditShipper() { Stop(); }

void AuditShipper::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AuditShipper::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    l.unlock();
    ShipOnce();
    l.lock();
    cv_.wait_for(l, std::chrono::nanoseconds(interval_ns_), [this] { return stop_; });
  }
}

// One ship. The lag is the node's head minus what the central holds; when a ship fails, the
// central's last known head stands in. A problem is logged when it first shows (and when it
// changes), not at every tick.
void AuditShipper::ShipOnce() {
  auto rep = fleet::Ship(url_, *log_, {});
  std::string problem;
  if (!rep.ok()) {
    problem = "shipping the audit log failed (retried every interval): " + rep.status().message();
    metrics_->failures.fetch_add(1);
    if (auto head = log_->EventCount(); head.ok()) {
      metrics_->lag_events.store(static_cast<int64_t>(*head) - central_seq_);
    }
  } else {
    // The central held more of this log at the last tick than now: someone deleted its newest
    // events there (they were just shipped again, which hides it from verify --central).
    if (rep->central_seq_before < central_seq_) {
      problem = "the central database held events 1.." + std::to_string(central_seq_) +
                " of this log, and now only 1.." + std::to_string(rep->central_seq_before) +
                ": events were deleted there (shipped again now)";
    }
    central_seq_ = rep->central_seq_after;
    metrics_->lag_events.store(rep->lag());
    metrics_->shipped_events.fetch_add(rep->events_shipped);
    metrics_->last_success_ns.store(NowNs());
    if (!rep->warning.empty()) problem = "shipping the audit log: " + rep->warning;
    if (!problem.empty()) metrics_->failures.fetch_add(1);
  }
  if (problem != last_problem_) {
    if (problem.empty()) {
      ServeLog("shipping the audit log works again");
    } else {
      ServeError(problem);
    }
    last_problem_ = problem;
  }
}

}  // namespace safex::serve
