#include "drivers/microvm/host_tsc.h"

#include <time.h>
#include <x86intrin.h>

#include <algorithm>
#include <array>

namespace safex::microvm {
namespace {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t OneSample(uint64_t window_ns) {
  uint64_t t0 = NowNs();
  uint64_t c0 = __rdtsc();
  uint64_t t1;
  do {
    t1 = NowNs();
  } while (t1 - t0 < window_ns);
  uint64_t c1 = __rdtsc();
  if (c1 <= c0 || t1 <= t0) return 0;
  // cycles per ms == kHz
  return (c1 - c0) * 1000000ull / (t1 - t0);
}

}  // namespace

uint64_t MeasureHostTscKhz() {
  std::array<uint64_t, 3> s{};
  for (uint64_t& v : s) v = OneSample(7 * 1000 * 1000);
  std::sort(s.begin(), s.end());
  uint64_t khz = s[1];  // the median resists one preempted sample
  // Anything outside 100 MHz .. 10 GHz is not a TSC we can hand to a guest.
  if (khz < 100000 || khz > 10000000) return 0;
  return khz;
}

}  // namespace safex::microvm
