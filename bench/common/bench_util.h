// What every benchmark program needs: medians and a fixed-size thread pool that measures runs
// per second. Header-only (bench/ programs are small and built on demand).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace safex::bench {

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Runs `one(thread, i)` (returning a Result or Status) `total` times spread over `threads`
// threads; returns runs per second. Failures are counted and the first one is printed: a
// throughput that includes failed runs is reported as such, never silently.
template <typename Fn>
double Throughput(int threads, int total, Fn one) {
  std::atomic<int> next{0}, failed{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i; (i = next.fetch_add(1)) < total;) {
        auto r = one(t, i);
        if (!r.ok() && failed.fetch_add(1) == 0) {
          std::fprintf(stderr, "first failed run: %s\n", r.status().ToString().c_str());
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (failed.load() > 0) std::fprintf(stderr, "%d runs failed\n", failed.load());
  return total / s;
}

}  // namespace safex::bench
