// Collects a run's stdout and stderr under one shared cap (the plan's output limit), as the
// backends that read them on the host (gVisor, native) receive them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "drivers/driver.h"

namespace safex::drivers {

class OutputCapture {
 public:
  // `observer` (may be null or empty) sees every kept byte as it is kept (driver.h).
  OutputCapture(CapturedStream* out, CapturedStream* err, uint64_t cap,
                const OutputObserver* observer = nullptr)
      : streams_{out, err}, cap_(cap), observer_(observer && *observer ? observer : nullptr) {}

  // `which`: 0 stdout, 1 stderr. Past the cap, capture stops, the stream is marked truncated and
  // exceeded() turns true: the run is stopped for its output limit.
  void Add(int which, const char* data, size_t n) {
    if (stopped_) return;
    CapturedStream* s = streams_[which];
    const size_t room = static_cast<size_t>(std::min<uint64_t>(cap_ - used_, n));
    s->data.append(data, room);
    used_ += room;
    s->total_bytes += room;
    if (observer_ != nullptr && room > 0) (*observer_)(which, std::string_view(data, room));
    if (room < n) {
      s->truncated = true;
      stopped_ = true;
    }
  }
  bool exceeded() const { return stopped_; }

 private:
  CapturedStream* streams_[2];
  uint64_t cap_;
  const OutputObserver* observer_;
  uint64_t used_ = 0;
  bool stopped_ = false;
};

}  // namespace safex::drivers
