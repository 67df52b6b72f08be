// What AuditLog::CheckIntegrity costs on a big log: makes a valid audit log of about SIZE MiB
// (default 1024) quickly, then times the full check (PRAGMA integrity_check + the whole chain +
// checkpoints) with a warm and a cold page cache, and the incremental check a run makes (the
// events since the last check), with the log already open and as a fresh process opens it.
//
//   build/bench/audit/integrity_bench [SIZE_MIB]
//
// BENCH_DIR (default /var/tmp) picks the directory: the disk you care about, with room for the
// log. KEEP=1 keeps the log afterwards (its path is printed).
//
// The log is made by one plain SQLite connection in one transaction (no fsync per event), with
// the audit library's own row conversion, canonical encoding and chain hash, so that every check
// below sees a valid chain.
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "audit/canonical.h"
#include "audit/event_row.h"
#include "bench/common/bench_util.h"
#include "common/sha256.h"
#include "common/unique_fd.h"

namespace {

using namespace safex;
using namespace safex::audit;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "integrity_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(const Status& st, const char* what) {
  if (!st.ok()) Die(std::string(what) + ": " + st.ToString());
}

void CheckSql(sqlite3* db, int rc, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    Die(std::string(what) + ": " + sqlite3_errmsg(db));
  }
}

RunStart Start(const std::string& id, int64_t t) {
  RunStart s;
  s.run_id = id;
  s.start_time_ns = t;
  s.requester = {1000, 1000, 4242};
  s.policy_name = "python-untrusted";
  s.policy_source_digest = std::string(64, 'a');
  s.plan_digest = std::string(64, 'b');
  s.backend = "gvisor";
  s.backend_mode = "systrap";
  s.argv = {"python3", "/data/in/job.py",      "--input", "/data/in/input.json",
            "--out",   "/data/out/result.json"};
  return s;
}

RunEnd End(const std::string& id, int64_t t) {
  RunEnd e;
  e.run_id = id;
  e.end_time_ns = t;
  e.exit_code = 0;
  e.verdict = Verdict::kOk;
  e.wall_ns = 150'000'000;
  e.cpu_ns = 100'000'000;
  e.peak_memory_bytes = 30 << 20;
  e.stdout_summary = {2, std::string(64, 'c'), false};
  e.stderr_summary = {0, std::string(64, 'd'), false};
  e.validator_results = {{"stdout", "accepted", ""},
                         {"file /data/out/result.json", "accepted", ""}};
  return e;
}

// Appends start+end pairs with a valid chain until the file reaches `target_bytes`; returns the
// number of events.
int64_t FillLog(const std::string& path, const std::string& log_id, int64_t target_bytes) {
  sqlite3* db = nullptr;
  CheckSql(db, sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), "open");
  // Only the result matters here, not durability: no journal, no syncs, a big cache for the
  // indexes. The log is switched back to WAL afterwards.
  CheckSql(db,
           sqlite3_exec(db,
                        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; "
                        "PRAGMA cache_size=-262144; BEGIN",
                        nullptr, nullptr, nullptr),
           "preparing the bulk load");
  std::string sql = "INSERT INTO events (";
  for (auto name : EventColumnNames()) sql += std::string(name) + ", ";
  sql += "hash) VALUES (";
  for (size_t i = 1; i <= kNumEventColumns + 1; ++i) {
    // Appended piecewise: GCC 12's -Wrestrict misfires on "?" + std::to_string(i) at -O2.
    sql += '?';
    sql += std::to_string(i);
    sql += i <= kNumEventColumns ? ", " : ")";
  }
  sqlite3_stmt* ins = nullptr;
  CheckSql(db, sqlite3_prepare_v2(db, sql.c_str(), -1, &ins, nullptr), "prepare insert");
  sqlite3_stmt* pages = nullptr;
  CheckSql(db, sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &pages, nullptr), "prepare");
  const int64_t page_size = 4096;  // SQLite's default, which AuditLog keeps
  Sha256Digest prev = GenesisHash(log_id);
  int64_t seq = 0;
  auto insert = [&](Result<EventRow> r) {
    if (!r.ok()) Die("row: " + r.status().ToString());
    EventRow row = std::move(r).value();
    row.values[kColSeq] = ++seq;
    prev = ChainHash(prev, EncodeEvent(row));
    row.hash = ToHex(prev);
    for (size_t i = 0; i < kNumEventColumns; ++i) {
      const int col = static_cast<int>(i + 1);
      if (const auto* n = std::get_if<int64_t>(&row.values[i])) {
        sqlite3_bind_int64(ins, col, *n);
      } else if (const auto* t = std::get_if<std::string>(&row.values[i])) {
        sqlite3_bind_text(ins, col, t->data(), static_cast<int>(t->size()), SQLITE_TRANSIENT);
      } else {
        sqlite3_bind_null(ins, col);
      }
    }
    sqlite3_bind_text(ins, static_cast<int>(kNumEventColumns + 1), row.hash.c_str(), -1,
                      SQLITE_TRANSIENT);
    CheckSql(db, sqlite3_step(ins), "insert");
    sqlite3_reset(ins);
  };
  const int64_t t0 = 1'790'000'000'000'000'000;  // 2026
  char id[32];
  for (int64_t run = 0;; ++run) {
    if (run % 10000 == 0) {
      CheckSql(db, sqlite3_step(pages), "page_count");
      const int64_t bytes = sqlite3_column_int64(pages, 0) * page_size;
      sqlite3_reset(pages);
      if (bytes >= target_bytes) break;
    }
    std::snprintf(id, sizeof id, "bench-%012lld", static_cast<long long>(run));
    const int64_t t = t0 + run * 1'000'000'000;
    insert(RowFromStart(Start(id, t), t));
    insert(RowFromEnd(End(id, t + 150'000'000), t));
  }
  sqlite3_finalize(pages);
  sqlite3_finalize(ins);
  CheckSql(db, sqlite3_exec(db, "COMMIT; PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr),
           "commit");
  sqlite3_close_v2(db);
  return seq;
}

// Drops the file's pages from the page cache (only clean pages can go: sync first), so that the
// next read comes from the disk. Touches this file only, not the machine's whole cache.
void DropFromPageCache(const std::string& path) {
  for (const std::string& p : {path, path + "-wal"}) {
    UniqueFd fd(open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) continue;
    fsync(fd.get());
    posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  }
}

VerifyReport MustPass(Result<VerifyReport> rep, const char* what) {
  if (!rep.ok()) Die(std::string(what) + ": " + rep.status().ToString());
  if (!rep->ok) Die(std::string(what) + " failed: " + rep->problem);
  return *rep;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t size_mib = argc > 1 ? std::atoll(argv[1]) : 1024;
  if (size_mib <= 0) Die("usage: integrity_bench [SIZE_MIB]");
  const char* base = std::getenv("BENCH_DIR");
  std::string dir = std::string(base ? base : "/var/tmp") + "/safex-integrity-bench.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) Die("mkdtemp failed");
  const std::string db = dir + "/audit.db";
  AuditOptions options;
  options.key_path = dir + "/audit.key";
  options.min_free_bytes = 0;

  std::string log_id;
  {
    auto log = AuditLog::Open(db, options);
    if (!log.ok()) Die("create: " + log.status().ToString());
    log_id = (*log)->log_id();
  }
  auto t = Clock::now();
  const int64_t events = FillLog(db, log_id, size_mib << 20);
  const double fill_s = Seconds(t);
  struct stat st {};
  stat(db.c_str(), &st);
  const double mib = static_cast<double>(st.st_size) / (1 << 20);
  std::printf("log: %.0f MiB, %lld events, made in %.1f s (%s)\n", mib,
              static_cast<long long>(events), fill_s, db.c_str());

  t = Clock::now();
  auto opened = AuditLog::Open(db, options);
  if (!opened.ok()) Die("open: " + opened.status().ToString());
  std::unique_ptr<AuditLog> log = std::move(opened).value();
  std::printf("open (writer): %.2f ms\n", Seconds(t) * 1e3);

  // A checkpoint first, so that the full checks below include one.
  t = Clock::now();
  auto cp = log->MakeCheckpoint();
  if (!cp.ok()) Die("checkpoint: " + cp.status().ToString());
  std::printf("checkpoint (a full check, then sign): %.1f s\n", Seconds(t));

  t = Clock::now();
  VerifyReport full = MustPass(log->CheckIntegrity(IntegrityCheck::kFull), "full check");
  double s = Seconds(t);
  std::printf(
      "full check, warm cache (integrity_check + chain + checkpoints): %.1f s, %.0f MiB/s, "
      "%.0f events/s (%llu events, %llu checkpoints)\n",
      s, mib / s, static_cast<double>(full.events) / s,
      static_cast<unsigned long long>(full.events),
      static_cast<unsigned long long>(full.checkpoints));

  VerifyOptions chain_only;
  chain_only.integrity_check = false;
  t = Clock::now();
  MustPass(log->Verify(chain_only), "chain check");
  const double chain_s = Seconds(t);
  std::printf("  of which the chain and checkpoints (no integrity_check): %.1f s\n", chain_s);

  DropFromPageCache(db);
  t = Clock::now();
  MustPass(log->CheckIntegrity(IntegrityCheck::kFull), "cold full check");
  s = Seconds(t);
  std::printf("full check, cold cache (after POSIX_FADV_DONTNEED): %.1f s, %.0f MiB/s\n", s,
              mib / s);

  // A run appends a start and an end; the next run's check reads those two.
  constexpr int kRuns = 21;
  std::vector<double> open_log, fresh_process;
  for (int i = 0; i < kRuns; ++i) {
    const std::string id = "after-" + std::to_string(i);
    Check(log->RecordStart(Start(id, 0)), "record start");
    Check(log->RecordEnd(End(id, 0)), "record end");
    t = Clock::now();
    VerifyReport inc =
        MustPass(log->CheckIntegrity(IntegrityCheck::kIncremental), "incremental check");
    open_log.push_back(Seconds(t) * 1e3);
    if (inc.kind != IntegrityCheck::kIncremental || inc.events != 2) {
      Die("the incremental check read " + std::to_string(inc.events) + " events");
    }
  }
  for (int i = 0; i < kRuns; ++i) {
    const std::string id = "fresh-" + std::to_string(i);
    Check(log->RecordStart(Start(id, 0)), "record start");
    Check(log->RecordEnd(End(id, 0)), "record end");
    t = Clock::now();
    auto fresh = AuditLog::Open(db, options);
    if (!fresh.ok()) Die("open: " + fresh.status().ToString());
    MustPass((*fresh)->CheckIntegrity(IntegrityCheck::kIncremental), "incremental check");
    fresh_process.push_back(Seconds(t) * 1e3);
  }
  std::printf("incremental check after one run (2 new events), log open: median %.2f ms\n",
              bench::Median(open_log));
  std::printf("open + incremental check (what a short-lived `safex run` adds): median %.2f ms\n",
              bench::Median(fresh_process));

  log.reset();
  if (std::getenv("KEEP") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return 0;
}
