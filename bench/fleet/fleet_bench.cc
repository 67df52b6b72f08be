// What the fleet audit costs (fleet/central.h): shipping a node's audit log into PostgreSQL and
// verifying it there, against the node's own `AuditLog::Verify()` of the same log measured in
// the same run (the anchor: the ratios are the figures to compare across machines).
//
//   sudo build/bench/fleet/fleet_bench [RUNS]      (or: sudo bash scripts/bench.sh fleet)
//
// The node log holds RUNS start+end pairs (default 50,000: 100,000 events), written in one
// SQLite transaction with a valid chain (BulkAppend), and one signed checkpoint. The server is a
// private cluster (tests/fleet/pg_cluster.h: initdb in /tmp, a Unix socket only, fsync off, run
// as the postgres user under root), stopped and removed at exit, on failure too.
//
// Three rounds; each round runs every measurement once (interleaved, so that load changes hit
// them alike) and each figure is the median of the three. Every ship goes into a fresh database
// (schema made and the log enrolled, untimed; autovacuum off for its events table, so that the
// verify right after a ship and the one after an explicit ANALYZE are what they say). Anchors: the
// same ship with the central's append trigger disabled (what the trigger costs), and the node's
// Verify() with and without `PRAGMA integrity_check` (the central check has no page-level
// counterpart). Goals: ship >= 5,000 events/s in batches, central verification >= 20,000 events/s.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit_log.h"
#include "bench/common/bench_util.h"
#include "fleet/central.h"
#include "tests/audit/audit_test_util.h"
#include "tests/fleet/pg_cluster.h"

namespace {

using namespace safex;
using Clock = std::chrono::steady_clock;

constexpr int kRounds = 3;
constexpr double kShipGoal = 5000;     // events/s, in batches
constexpr double kVerifyGoal = 20000;  // events/s

// At namespace scope so that exit() (Die included) stops the server and removes both
// directories: no postgres process or temp dir outlives the benchmark.
std::unique_ptr<safex::testing::PrivateCluster> g_cluster;
std::unique_ptr<audit::testing::TempDir> g_dir;
std::once_flag g_stop_once;
std::atomic<bool> g_signalled{false};

// Once, whoever comes first (the end of main or a signal): the server stopped, both removed.
void StopAll() {
  std::call_once(g_stop_once, [] {
    g_cluster.reset();
    g_dir.reset();
  });
}

[[noreturn]] void Die(const std::string& what) {
  // A signal's clean-up stops the server under the main thread, whose next step fails: that
  // failure is not the news, and exit() must not race the clean-up.
  if (g_signalled) {
    for (;;) pause();
  }
  std::fprintf(stderr, "fleet_bench: %s\n", what.c_str());
  std::exit(1);
}

// SIGINT, SIGTERM and SIGHUP (a run takes a minute or more: it gets interrupted) end the bench with
// the same clean-up as a normal end. They are blocked here and taken by a thread that waits for
// them, so the clean-up runs as ordinary code rather than in a signal handler. Called after the
// server started: a child would inherit the mask.
void StopOnSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    sigwait(&set, &sig);
    g_signalled = true;
    std::fprintf(stderr, "fleet_bench: signal %d: stopping the server\n", sig);
    StopAll();
    _exit(128 + sig);
  }).detach();
}

void Check(const Status& st, const std::string& what) {
  if (!st.ok()) Die(what + ": " + st.ToString());
}

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One timed measurement: events per wall second, and this process's CPU over the wall (for a
// ship or a central verify, the rest is the server's work and waiting for it).
struct Sample {
  double rate = 0;
  double cpu_share = 0;
};

template <typename Fn>
Sample Time(uint64_t events, Fn fn) {
  const auto t0 = Clock::now();
  const double c0 = CpuSeconds();
  fn();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  return {static_cast<double>(events) / wall, (CpuSeconds() - c0) / wall};
}

struct Node {
  std::string db;
  std::string key;
  std::unique_ptr<audit::AuditLog> log;
  uint64_t events = 0;
};

std::unique_ptr<audit::AuditLog> OpenLog(const Node& n) {
  audit::AuditOptions o;
  o.key_path = n.key;
  o.min_free_bytes = 0;  // the bench's disk may be fuller than a node's should be
  auto log = audit::AuditLog::Open(n.db, o);
  if (!log.ok()) Die("opening the node log: " + log.status().ToString());
  return std::move(log).value();
}

// The node log: made, filled by one bulk transaction (AuditLog commits every event durably,
// far too slow to make 100,000), reopened, and checkpointed once so that both verifications
// check a signature as a real log's would.
Node MakeNode(int runs) {
  Node n;
  n.db = g_dir->File("node.db");
  n.key = g_dir->File("node.key");
  OpenLog(n).reset();  // creates the file and its log id; BulkAppend needs both
  audit::testing::BulkAppend(n.db, runs, "bench");
  n.log = OpenLog(n);
  auto count = n.log->EventCount();
  if (!count.ok() || *count != 2 * static_cast<uint64_t>(runs)) Die("BulkAppend fell short");
  n.events = *count;
  Check(n.log->MakeCheckpoint().status(), "checkpoint");
  return n;
}

void OwnerSql(const std::string& db, const std::string& sql) {
  const std::string err = g_cluster->Sql(sql, db);
  if (!err.empty()) Die(sql + ": " + err);
}

// A fresh database with the central schema and the node's log enrolled (untimed set-up).
// Autovacuum is off for the events table: whether its ANALYZE has run yet decides the plan of
// verify's page query, so the bench ANALYZEs where it wants statistics instead of racing it
// (a verify of 500,000 events right after the ship measured 16,000 or 164,000 events/s by that
// race alone).
std::string FreshCentral(const Node& n, const std::string& name) {
  const std::string url = g_cluster->NewDatabase(name);
  if (url.empty()) Die("cannot make database " + name);
  Check(fleet::InitCentral(url).status(), "InitCentral");
  OwnerSql(name, "ALTER TABLE safex.events SET (autovacuum_enabled = false)");
  auto e = fleet::EnrolmentOf(*n.log, n.key, "node-1");
  Check(e.status(), "EnrolmentOf");
  Check(fleet::Enrol(url, *e), "Enrol");
  return url;
}

void DropDatabase(const std::string& name) {
  const std::string err = g_cluster->Sql("DROP DATABASE " + name);
  if (!err.empty()) Die("DROP DATABASE " + name + ": " + err);
}

// Ships up to `max_events` (0: all there is) and checks that exactly `expected` went.
void ShipChecked(const std::string& url, const Node& n, uint64_t batch, uint64_t max_events,
                 uint64_t expected) {
  fleet::ShipOptions o;
  o.batch_events = batch;
  o.max_events = max_events;
  auto rep = fleet::Ship(url, *n.log, o);
  Check(rep.status(), "Ship");
  if (rep->events_shipped != expected || !rep->warning.empty()) {
    Die("Ship sent " + std::to_string(rep->events_shipped) + " events: " + rep->warning);
  }
}

constexpr char kTriggerOff[] = "ALTER TABLE safex.events DISABLE TRIGGER events_append";

// The whole log into a fresh database `name`: a node's backlog into a new central, whose table
// has no statistics yet. `trigger` false: with the central's append trigger (enrolment, role,
// the next seq; once per COPY) disabled, the anchor that shows what the trigger costs.
Sample ShipAll(const Node& n, uint64_t batch, bool trigger, const std::string& name) {
  const std::string url = FreshCentral(n, name);
  if (!trigger) OwnerSql(name, kTriggerOff);
  return Time(n.events, [&] { ShipChecked(url, n, batch, 0, n.events); });
}

// A central that has held this log for a while: the first half is there (shipped with the
// trigger off: untimed set-up, and fast) and the table's statistics are current (ANALYZE, as
// autovacuum does after enough inserts); the second half is timed, the trigger on. Next to the
// fresh central's figure it shows whether a ship's cost depends on the planner's statistics (it
// did: a plan made without them once made the trigger's lookup quadratic).
Sample ShipSecondHalf(const Node& n, const std::string& name) {
  const std::string url = FreshCentral(n, name);
  const uint64_t half = n.events / 2;
  OwnerSql(name, kTriggerOff);
  ShipChecked(url, n, 5000, half, half);
  OwnerSql(name, "ALTER TABLE safex.events ENABLE TRIGGER events_append; ANALYZE safex.events");
  return Time(n.events - half, [&] { ShipChecked(url, n, 5000, 0, n.events - half); });
}

Sample VerifyCentralOnce(const std::string& url, uint64_t events) {
  return Time(events, [&] {
    auto reps = fleet::VerifyCentral(url, std::nullopt);
    Check(reps.status(), "VerifyCentral");
    if (reps->size() != 1 || !(*reps)[0].ok || (*reps)[0].events != events ||
        (*reps)[0].checkpoints != 1) {
      Die("VerifyCentral did not pass the whole log: " +
          (reps->empty() ? std::string("no log") : (*reps)[0].problem));
    }
  });
}

Sample VerifyLocalOnce(audit::AuditLog& log, bool integrity_check, uint64_t events) {
  audit::VerifyOptions o;
  o.integrity_check = integrity_check;
  return Time(events, [&] {
    auto rep = log.Verify(o);
    Check(rep.status(), "Verify");
    if (!rep->ok || rep->events != events) Die("the node's Verify failed: " + rep->problem);
  });
}

enum RowId {
  kShip500,
  kShip5000,
  kShip20000,
  kShipSteady,
  kShipNoTrigger,
  kVerifyCentral,
  kVerifyCentralAnalyzed,
  kVerifyLocal,
  kVerifyChain,
  kNumRows
};

constexpr std::array<const char*, kNumRows> kRowNames = {
    "ship into a fresh central, batch 500",
    "ship into a fresh central, batch 5000 (the default)",
    "ship into a fresh central, batch 20000",
    "ship the second half, batch 5000, into a central holding the first (ANALYZEd)",
    "ship into a fresh central, batch 5000, append trigger disabled (anchor)",
    "verify --central (VerifyCentral), right after the ship (no statistics yet)",
    "verify --central, the table ANALYZEd first",
    "node Verify(): integrity_check + chain + checkpoint (anchor)",
    "node Verify() without integrity_check: chain + checkpoint",
};

struct Row {
  std::vector<double> rates;
  std::vector<double> cpu_shares;
  void Add(Sample s) {
    rates.push_back(s.rate);
    cpu_shares.push_back(s.cpu_share);
  }
  double rate() const { return bench::Median(rates); }
};

// Each figure as it comes (a round of 500,000 events takes minutes).
void Add(std::array<Row, kNumRows>* rows, int r, RowId id, Sample s) {
  (*rows)[id].Add(s);
  std::printf("round %d: %s: %.0f events/s\n", r + 1, kRowNames[id], s.rate);
  std::fflush(stdout);
}

// One round: every measurement once. The central verify reads the round's batch-5000 database,
// dropped afterwards like the others (each holds a full copy of the log).
void Round(const Node& n, int r, std::array<Row, kNumRows>* rows) {
  const std::string p = "r" + std::to_string(r) + "_";
  Add(rows, r, kShip500, ShipAll(n, 500, true, p + "b500"));
  Add(rows, r, kShip5000, ShipAll(n, 5000, true, p + "b5000"));
  Add(rows, r, kShip20000, ShipAll(n, 20000, true, p + "b20000"));
  Add(rows, r, kShipSteady, ShipSecondHalf(n, p + "steady"));
  Add(rows, r, kShipNoTrigger, ShipAll(n, 5000, false, p + "notrigger"));
  Add(rows, r, kVerifyCentral, VerifyCentralOnce(g_cluster->Url(p + "b5000"), n.events));
  // What autovacuum does a while after a bulk ship (here it is off): the page query's plan
  // depends on it.
  OwnerSql(p + "b5000", "ANALYZE safex.events");
  Add(rows, r, kVerifyCentralAnalyzed, VerifyCentralOnce(g_cluster->Url(p + "b5000"), n.events));
  Add(rows, r, kVerifyLocal, VerifyLocalOnce(*n.log, true, n.events));
  Add(rows, r, kVerifyChain, VerifyLocalOnce(*n.log, false, n.events));
  for (const char* db : {"b500", "b5000", "b20000", "steady", "notrigger"}) DropDatabase(p + db);
}

// Ship rows against the trigger-less ship, verify rows against the node's Verify().
double Ratio(const std::array<Row, kNumRows>& rows, int i) {
  const int anchor = i < kVerifyCentral ? kShipNoTrigger : kVerifyLocal;
  return rows[i].rate() / rows[anchor].rate();
}

const char* Verdict(double rate, double goal) { return rate >= goal ? "met" : "NOT met"; }

// The median of the rounds, and their range (the load of a shared machine shows there).
void PrintRows(const std::array<Row, kNumRows>& rows) {
  std::printf("| measurement | events/s | range | this process's CPU / wall | vs anchor |\n");
  std::printf("|---|---|---|---|---|\n");
  for (int i = 0; i < kNumRows; ++i) {
    const auto [lo, hi] = std::minmax_element(rows[i].rates.begin(), rows[i].rates.end());
    std::printf("| %s | %.0f | %.0f-%.0f | %.0f %% | %.2fx |\n", kRowNames[i], rows[i].rate(), *lo,
                *hi, 100 * bench::Median(rows[i].cpu_shares), Ratio(rows, i));
  }
}

void PrintGoals(const std::array<Row, kNumRows>& rows) {
  const double fresh = rows[kShip5000].rate(), steady = rows[kShipSteady].rate();
  const double verify = rows[kVerifyCentral].rate();
  const double analyzed = rows[kVerifyCentralAnalyzed].rate();
  std::printf("\nverify --central / node Verify(): %.2fx, ANALYZEd %.2fx\n",
              verify / rows[kVerifyLocal].rate(), analyzed / rows[kVerifyLocal].rate());
  std::printf(
      "goal: ship >= 5,000 events/s in batches of 5000: fresh central %.0f, %s; "
      "holding the first half %.0f, %s\n",
      fresh, Verdict(fresh, kShipGoal), steady, Verdict(steady, kShipGoal));
  std::printf(
      "goal: central verification >= 20,000 events/s: right after the ship %.0f, %s; "
      "ANALYZEd %.0f, %s\n",
      verify, Verdict(verify, kVerifyGoal), analyzed, Verdict(analyzed, kVerifyGoal));
}

double FileMiB(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<double>(st.st_size) / (1 << 20) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 50000;
  if (runs <= 0) Die("usage: fleet_bench [RUNS] (start+end pairs; default 50000)");
  std::string why;
  g_cluster = safex::testing::PrivateCluster::Start(&why);
  if (g_cluster == nullptr) Die("PostgreSQL: " + why);
  StopOnSignals();
  g_dir = std::make_unique<audit::testing::TempDir>();
  const auto t0 = Clock::now();
  Node node = MakeNode(runs);
  std::printf("node log: %llu events, %.1f MiB, made in %.1f s; %d rounds, medians below\n",
              static_cast<unsigned long long>(node.events), FileMiB(node.db),
              std::chrono::duration<double>(Clock::now() - t0).count(), kRounds);
  std::fflush(stdout);
  std::array<Row, kNumRows> rows;
  for (int r = 0; r < kRounds; ++r) Round(node, r, &rows);
  std::printf("\n");
  PrintRows(rows);
  PrintGoals(rows);
  node.log.reset();
  StopAll();
  return 0;
}
