#include "supervisor/serve/refusal_limiter.h"

#include <algorithm>

#include "audit/time_format.h"

namespace safex::serve {

RefusalLimiter::RefusalLimiter(RefusalLimits limits) : limits_(limits) {}

RefusalLimiter::Caller& RefusalLimiter::Find(uint32_t uid, Clock::time_point now) {
  auto it = callers_.find(uid);
  if (it != callers_.end()) return it->second;
  if (callers_.size() >= limits_.max_callers) {
    // Forget callers that are idle (a full bucket, nothing pending); if none is, the newcomer
    // shares the overflow bucket: the table never grows past the bound.
    for (auto c = callers_.begin(); c != callers_.end();) {
      if (c->second.pending.count == 0 && c->second.tokens >= limits_.burst) {
        c = callers_.erase(c);
      } else {
        ++c;
      }
    }
    if (callers_.size() >= limits_.max_callers) uid = kOverflowUid;
  }
  auto [pos, inserted] = callers_.try_emplace(uid);
  if (inserted) {
    pos->second.tokens = limits_.burst;
    pos->second.refilled = now;
    pos->second.pending.uid = uid;
  }
  return pos->second;
}

bool RefusalLimiter::Admit(uint32_t uid, RefusalReason why, Clock::time_point now) {
  std::lock_guard<std::mutex> l(mu_);
  Caller& c = Find(uid, now);
  const double per_second = limits_.per_minute / 60.0;
  const double elapsed = std::chrono::duration<double>(now - c.refilled).count();
  if (elapsed > 0) {
    c.tokens = std::min<double>(limits_.burst, c.tokens + elapsed * per_second);
    c.refilled = now;
  }
  if (c.tokens >= 1) {
    c.tokens -= 1;
    return true;
  }
  CountLocked(c, why, now);
  return false;
}

void RefusalLimiter::Count(uint32_t uid, RefusalReason why, Clock::time_point now) {
  std::lock_guard<std::mutex> l(mu_);
  CountLocked(Find(uid, now), why, now);
}

void RefusalLimiter::CountLocked(Caller& c, RefusalReason why, Clock::time_point now) {
  const int64_t wall = audit::NowNs();
  if (c.pending.count == 0) {
    c.first_pending = now;
    c.pending.first_ns = wall;
  }
  ++c.pending.count;
  c.pending.last_ns = wall;
  ++c.pending.by_reason[why];
}

std::vector<RefusalLimiter::Summary> RefusalLimiter::TakeDue(Clock::time_point now, bool all) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<Summary> out;
  for (auto& [uid, c] : callers_) {
    if (c.pending.count == 0) continue;
    if (!all && now - c.first_pending < limits_.summary_interval) continue;
    out.push_back(c.pending);
    c.pending = Summary{};
    c.pending.uid = uid;
  }
  return out;
}

uint64_t RefusalLimiter::pending() const {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t n = 0;
  for (const auto& [uid, c] : callers_) n += c.pending.count;
  return n;
}

std::string RefusalLimiter::Summary::Text() const {
  std::string who =
      uid == kOverflowUid ? "callers beyond the limiter's table" : "uid " + std::to_string(uid);
  std::string text = std::to_string(count) + " further refusal" + (count == 1 ? "" : "s") + " of " +
                     who + " between " + audit::FormatIso8601(first_ns) + " and " +
                     audit::FormatIso8601(last_ns) +
                     " were not recorded one by one (over the refusal rate):";
  bool first = true;
  for (const auto& [reason, n] : by_reason) {
    text += std::string(first ? " " : ", ") + RefusalReasonName(reason) + " x" + std::to_string(n);
    first = false;
  }
  return text;
}

}  // namespace safex::serve
