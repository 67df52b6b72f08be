// The service's audit shipper: every audit_ship_interval, the audit log's new events and
// checkpoints go to the fleet's central database (fleet/central.h, docs/audit.md "Fleet"), on a
// thread and a read-only log connection of their own. Shipping never holds up a run: a central
// database that is down only makes the lag grow (reported on /metrics and in the service log),
// and the next tick resumes where the central's copy ends.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "audit/audit_log.h"
#include "common/status.h"
#include "supervisor/serve/metrics.h"

namespace safex::serve {

class AuditShipper {
 public:
  // Opens its own read-only connection to the log at `audit_db` (an error stops the service
  // from starting: the operator asked for shipping) and starts the thread; the first ship is
  // right away.
  static Result<std::unique_ptr<AuditShipper>> Start(const std::string& url,
                                                     const std::string& audit_db,
                                                     uint64_t interval_ns, ShipMetrics* metrics);
  ~AuditShipper();  // Stop()
  // Wakes the thread and waits for it (a ship in progress ends its current batch first).
  void Stop();

 private:
  AuditShipper() = default;
  void Loop();
  void ShipOnce();

  std::string url_;
  uint64_t interval_ns_ = 0;
  ShipMetrics* metrics_ = nullptr;
  std::unique_ptr<audit::AuditLog> log_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
  // The thread's own: the central's head after the last ship that worked, and the problem last
  // logged ("" = none).
  int64_t central_seq_ = 0;
  std::string last_problem_;
};

}  // namespace safex::serve
