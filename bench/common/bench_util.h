// What every benchmark program needs: medians and a fixed-size thread pool that measures runs
// per second. Header-only (bench/ programs are small and built on demand).
#pragma once

#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "common/unique_fd.h"

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

// Runs argv (no shell; stdio on /dev/null) and returns its wall time in ms; an error unless it
// exits 0.
inline Result<double> TimedRun(const std::vector<std::string>& argv) {
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnOptions so;
  so.argv = argv;
  so.fds = {{0, devnull.get()}, {1, devnull.get()}, {2, devnull.get()}};
  auto t0 = std::chrono::steady_clock::now();
  SAFEX_ASSIGN_OR_RETURN(Subprocess p, Subprocess::Spawn(so));
  SAFEX_ASSIGN_OR_RETURN(std::optional<ExitStatus> st, p.Wait());
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!st || !st->exited || st->code != 0) {
    return Status::Internal(argv[1] + " failed with " + std::to_string(st ? st->ShellCode() : -1));
  }
  return ms;
}

}  // namespace safex::bench
