// Audit log throughput on a real file (not tmpfs), every event its own durable transaction
// (WAL, synchronous=FULL). Run on demand:
//   build/bench/audit/audit_bench --benchmark_min_time=3
// BENCH_DIR (default /var/tmp) picks the directory; it must be on the disk you care about.
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "audit/audit_log.h"

namespace {

using safex::audit::AuditLog;
using safex::audit::AuditOptions;

class BenchDir {
 public:
  BenchDir() {
    const char* base = std::getenv("BENCH_DIR");
    std::string tmpl = std::string(base ? base : "/var/tmp") + "/safex-audit-bench.XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) abort();
    path_ = tmpl;
  }
  ~BenchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

AuditOptions Options(const BenchDir& dir) {
  AuditOptions o;
  o.key_path = dir.File("audit.key");
  return o;
}

safex::audit::RunStart Start(const std::string& id) {
  safex::audit::RunStart s;
  s.run_id = id;
  s.requester = {1000, 1000, 4242};
  s.policy_name = "python-untrusted";
  s.policy_source_digest = std::string(64, 'a');
  s.plan_digest = std::string(64, 'b');
  s.backend = "gvisor";
  s.backend_mode = "systrap";
  s.argv = {"python3", "-c", "print(1)"};
  return s;
}

safex::audit::RunEnd End(const std::string& id) {
  safex::audit::RunEnd e;
  e.run_id = id;
  e.exit_code = 0;
  e.wall_ns = 150'000'000;
  e.cpu_ns = 100'000'000;
  e.peak_memory_bytes = 30 << 20;
  e.stdout_summary = {2, std::string(64, 'c'), false};
  e.stderr_summary = {0, std::string(64, 'd'), false};
  e.validator_results = {{"stdout", "accepted", ""}};
  return e;
}

// One durable event per iteration (a refusal: a single self-contained event).
void BM_DurableAppend(benchmark::State& state) {
  BenchDir dir;
  auto log = AuditLog::Open(dir.File("audit.db"), Options(dir));
  if (!log.ok()) {
    state.SkipWithError(log.status().message().c_str());
    return;
  }
  safex::audit::Refusal r;
  r.requester = {1000, 1000, 1};
  r.policy_name = "python-untrusted";
  r.argv = {"python3", "x.py"};
  r.reason = "benchmark";
  int64_t i = 0;
  for (auto _ : state) {
    r.run_id = "r" + std::to_string(i++);
    if (!(*log)->RecordRefusal(r).ok()) state.SkipWithError("append failed");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DurableAppend)->Unit(benchmark::kMicrosecond)->UseRealTime();

// What a run pays on an open log: start + end, two durable commits.
void BM_StartEnd(benchmark::State& state) {
  BenchDir dir;
  auto log = AuditLog::Open(dir.File("audit.db"), Options(dir));
  if (!log.ok()) {
    state.SkipWithError(log.status().message().c_str());
    return;
  }
  int64_t i = 0;
  for (auto _ : state) {
    std::string id = "run-" + std::to_string(i++);
    if (!(*log)->RecordStart(Start(id)).ok() || !(*log)->RecordEnd(End(id)).ok()) {
      state.SkipWithError("append failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_StartEnd)->Unit(benchmark::kMicrosecond)->UseRealTime();

// What one `safex run` CLI invocation pays: open the log, CheckWritable, start, end, close.
void BM_OpenCheckStartEnd(benchmark::State& state) {
  BenchDir dir;
  const std::string db = dir.File("audit.db");
  { auto init = AuditLog::Open(db, Options(dir)); }
  int64_t i = 0;
  for (auto _ : state) {
    std::string id = "run-" + std::to_string(i++);
    auto log = AuditLog::Open(db, Options(dir));
    if (!log.ok() || !(*log)->CheckWritable().ok() || !(*log)->RecordStart(Start(id)).ok() ||
        !(*log)->RecordEnd(End(id)).ok()) {
      state.SkipWithError("audit step failed");
    }
  }
}
BENCHMARK(BM_OpenCheckStartEnd)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Verification speed (full chain recompute, no integrity_check), on a log of range(0) events.
void BM_Verify(benchmark::State& state) {
  BenchDir dir;
  const std::string db = dir.File("audit.db");
  auto log = AuditLog::Open(db, Options(dir));
  if (!log.ok()) {
    state.SkipWithError(log.status().message().c_str());
    return;
  }
  // Fill quickly: durability is not what is measured here.
  for (int64_t i = 0; i < state.range(0) / 2; ++i) {
    std::string id = "run-" + std::to_string(i);
    if (!(*log)->RecordStart(Start(id)).ok() || !(*log)->RecordEnd(End(id)).ok()) {
      state.SkipWithError("fill failed");
      return;
    }
  }
  safex::audit::VerifyOptions vo;
  vo.integrity_check = false;
  for (auto _ : state) {
    auto rep = (*log)->Verify(vo);
    if (!rep.ok() || !rep->ok) state.SkipWithError("verify failed");
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Verify)->Arg(2000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
