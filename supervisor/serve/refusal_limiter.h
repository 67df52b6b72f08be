// How many refusals of one caller are written to the audit log one by one.
//
// Regression (a caller with no allow rule filled the audit log's disk): every refusal was written
// with its full argv at synchronous=FULL with no bound, 414 MB in 20 s; a 64 MiB log volume filled
// in 8 s, and allowed users' runs were then refused. Now, per uid, a token bucket (rate per
// minute, burst) decides which refusals are recorded in full; the others are counted, by reason,
// and recorded later as ONE summary event per uid and interval ("N further refusals of uid U
// between T1 and T2: forbidden xN, bad_request xM"). Every refusal is accounted for; the log grows
// by at most (burst + rate x time) records, each with a bounded argv, plus one summary per uid per
// interval. The table of uids is bounded too: beyond max_callers, unknown uids share one bucket.
//
// Pure and thread-safe (one mutex); the server calls it from its loop and its workers.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "supervisor/serve/metrics.h"

namespace safex::serve {

struct RefusalLimits {
  uint32_t per_minute = 60;
  uint32_t burst = 20;
  std::chrono::seconds summary_interval{60};
  size_t max_callers = 4096;
};

class RefusalLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  // The uid that stands for every caller beyond max_callers.
  static constexpr uint32_t kOverflowUid = 0xffffffffu;

  explicit RefusalLimiter(RefusalLimits limits = {});

  // Whether this refusal is recorded in full. When not, it is counted for the uid's next summary.
  bool Admit(uint32_t uid, RefusalReason why, Clock::time_point now);
  // Counts a refusal for the uid's next summary whatever its bucket holds (the refusal could not
  // be recorded one by one for another reason: the log is low on space, its backlog is full).
  void Count(uint32_t uid, RefusalReason why, Clock::time_point now);

  struct Summary {
    uint32_t uid = 0;
    uint64_t count = 0;
    int64_t first_ns = 0;  // wall clock (CLOCK_REALTIME) of the first and last counted refusal
    int64_t last_ns = 0;
    std::map<RefusalReason, uint64_t> by_reason;
    std::string Text() const;  // the summary event's reason
  };
  // Summaries whose interval has passed since the uid's first uncounted refusal (all pending ones
  // when `all`, e.g. at shutdown). Taken summaries are forgotten: record them.
  std::vector<Summary> TakeDue(Clock::time_point now, bool all = false);

  // Refusals counted and not yet taken in a summary, over every uid (for /metrics).
  uint64_t pending() const;

 private:
  struct Caller {
    double tokens = 0;
    Clock::time_point refilled;
    Clock::time_point first_pending;
    Summary pending;
  };
  Caller& Find(uint32_t uid, Clock::time_point now);
  void CountLocked(Caller& c, RefusalReason why, Clock::time_point now);

  const RefusalLimits limits_;
  mutable std::mutex mu_;
  std::map<uint32_t, Caller> callers_;  // guarded by mu_
};

}  // namespace safex::serve
