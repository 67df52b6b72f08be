#include "audit/audit_log.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "audit/canonical.h"
#include "audit/json_bytes.h"
#include "audit/schema.h"
#include "audit/sqlite_db.h"
#include "audit/time_format.h"
#include "common/sha256.h"
#include "common/unique_fd.h"

namespace safex::audit {

using internal::DbPtr;
using internal::Exec;
using internal::SqliteStatus;
using internal::Stmt;

namespace {

constexpr char kMemoryPath[] = ":memory:";

// The columns of the `runs` view that RunSummaryFrom() reads, in this order.
constexpr char kRunColumns[] =
    "run_id, state, verdict, start_ns, end_ns, uid, gid, pid, policy_name, policy_source_digest, "
    "plan_digest, backend, backend_mode, argv, exit_code, signal, limits_fired, wall_ns, cpu_ns, "
    "peak_memory_bytes, stdout_bytes, stdout_sha256, stdout_truncated, stderr_bytes, "
    "stderr_sha256, stderr_truncated, validator_results, denied_egress, reason, start_seq, "
    "end_seq";

// Whether the events table has the version 2 columns. A version 1 log opened read-only does
// not (writers migrate it at Open): its rows read as if those columns were NULL, which is what
// they would hold after the migration.
bool HasV2Columns(sqlite3* db) {
  Result<Stmt> s = Stmt::Prepare(
      db, "SELECT count(*) FROM pragma_table_info('events') WHERE name = 'enforcement'");
  if (!s.ok()) return true;  // the SELECT that follows reports the real problem
  Result<bool> row = s->Step();
  const bool has = !row.ok() || !*row || s->Int(0) > 0;
  s->Reset();
  return has;
}

std::string EventColumnList(bool v2 = true) {
  std::string cols;
  const auto names = EventColumnNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (!cols.empty()) cols += ", ";
    cols +=
        v2 || i < kNumV1EventColumns ? std::string(names[i]) : "NULL AS " + std::string(names[i]);
  }
  return cols;
}

std::string SelectEventsSql(sqlite3* db, std::string_view where) {
  return "SELECT " + EventColumnList(HasV2Columns(db)) + ", hash FROM events " +
         std::string(where) + " ORDER BY seq";
}

// kRunColumns, with the version 2 columns as NULL on a version 1 log.
std::string RunColumns(sqlite3* db) {
  return std::string(kRunColumns) +
         (HasV2Columns(db) ? ", purpose, enforcement" : ", NULL AS purpose, NULL AS enforcement");
}

std::string ParentDir(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status FileErrno(const char* what, const std::string& path, int err) {
  if (err == EROFS) {
    return Status::PermissionDenied(std::string(what) + "(" + path + "): read-only file system");
  }
  return Status::Errno(what, path, err);
}

std::string RandomHex(size_t bytes) {
  std::string buf(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      // getrandom cannot fail on a kernel that has it once the pool is ready; there is no
      // acceptable fallback for unique ids.
      abort();
    }
    got += static_cast<size_t>(n);
  }
  return ToHex(reinterpret_cast<const uint8_t*>(buf.data()), bytes);
}

int HexDigitValue(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

Result<EventRow> ReadEventRow(const Stmt& s) {
  EventRow row;
  for (size_t i = 0; i < kNumEventColumns; ++i) {
    SAFEX_ASSIGN_OR_RETURN(row.values[i], s.Value(static_cast<int>(i)));
  }
  row.hash = s.Text(static_cast<int>(kNumEventColumns));
  return row;
}

std::optional<int64_t> OptInt(const Stmt& s, int i) {
  if (s.IsNull(i)) return std::nullopt;
  return s.Int(i);
}

Result<RunSummary> RunSummaryFrom(const Stmt& s) {
  RunSummary r;
  int i = 0;
  r.run_id = s.Text(i++);
  r.state = s.Text(i++);
  r.verdict = s.Text(i++);
  r.start_ns = s.Int(i++);
  r.end_ns = OptInt(s, i++);
  if (auto v = OptInt(s, i++)) r.requester.uid = static_cast<uint32_t>(*v);
  if (auto v = OptInt(s, i++)) r.requester.gid = static_cast<uint32_t>(*v);
  if (auto v = OptInt(s, i++)) r.requester.pid = static_cast<int32_t>(*v);
  r.policy_name = s.Text(i++);
  r.policy_source_digest = s.Text(i++);
  r.plan_digest = s.Text(i++);
  r.backend = s.Text(i++);
  r.backend_mode = s.Text(i++);
  if (!s.IsNull(i)) {
    SAFEX_ASSIGN_OR_RETURN(r.argv, DecodeStringList(s.Text(i)));
  }
  ++i;
  r.exit_code = OptInt(s, i++);
  r.signal = OptInt(s, i++);
  if (!s.IsNull(i)) {
    SAFEX_ASSIGN_OR_RETURN(r.limits_fired, DecodeStringList(s.Text(i)));
  }
  ++i;
  r.wall_ns = OptInt(s, i++);
  r.cpu_ns = OptInt(s, i++);
  r.peak_memory_bytes = OptInt(s, i++);
  for (auto* stream : {&r.stdout_summary, &r.stderr_summary}) {
    if (!s.IsNull(i)) {
      StreamSummary sum;
      sum.bytes = static_cast<uint64_t>(s.Int(i));
      sum.sha256 = s.Text(i + 1);
      sum.truncated = s.Int(i + 2) != 0;
      *stream = sum;
    }
    i += 3;
  }
  if (!s.IsNull(i)) {
    SAFEX_ASSIGN_OR_RETURN(r.validator_results, DecodeValidatorResults(s.Text(i)));
  }
  ++i;
  if (!s.IsNull(i)) {
    SAFEX_ASSIGN_OR_RETURN(r.denied_egress, DecodeDeniedEgress(s.Text(i)));
  }
  ++i;
  r.reason = s.Text(i++);
  r.start_seq = s.Int(i++);
  r.end_seq = OptInt(s, i++);
  r.purpose = s.Text(i++);
  r.enforcement = s.Text(i++);
  return r;
}

Result<Checkpoint> CheckpointFrom(const Stmt& s) {
  Checkpoint c;
  c.log_id = s.Text(0);
  if (s.Int(1) < 0) return Status::DataLoss("checkpoint with a negative event count");
  c.event_count = static_cast<uint64_t>(s.Int(1));
  c.head_hash = s.Text(2);
  c.time_ns = s.Int(3);
  c.public_key = s.Text(4);
  c.signature = s.Text(5);
  return c;
}

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// SQLite's own busy handler sleeps up to 100 ms between retries, so a waiting writer keeps
// missing the short gaps between another process's transactions and can starve. This one polls
// every 0.05..2 ms with jitter, and gives up after the configured timeout.
struct BusyWait {
  int64_t timeout_ns = 0;
  int64_t started_ns = 0;
  uint64_t rng = 0;
};

int BusyHandler(void* arg, int count) {
  auto* b = static_cast<BusyWait*>(arg);
  const int64_t now = MonotonicNs();
  if (count == 0) b->started_ns = now;
  if (now - b->started_ns >= b->timeout_ns) return 0;
  b->rng = b->rng * 6364136223846793005ULL + 1442695040888963407ULL;
  const uint64_t span_us = std::min<uint64_t>(2000, 100 + static_cast<uint64_t>(count) * 20);
  const auto sleep_us = static_cast<long>(50 + (b->rng >> 33) % span_us);
  timespec ts{0, sleep_us * 1000};
  nanosleep(&ts, nullptr);
  return 1;
}

// Rolls back an open transaction when it goes out of scope uncommitted.
class TxnGuard {
 public:
  explicit TxnGuard(sqlite3* db) : db_(db) {}
  ~TxnGuard() {
    if (!sqlite3_get_autocommit(db_)) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  TxnGuard(const TxnGuard&) = delete;
  TxnGuard& operator=(const TxnGuard&) = delete;

 private:
  sqlite3* db_;
};

Result<std::vector<Checkpoint>> ReadCheckpoints(sqlite3* db) {
  SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db,
                                               "SELECT log_id, event_count, head_hash, time_ns, "
                                               "public_key, signature FROM checkpoints ORDER BY "
                                               "id"));
  std::vector<Checkpoint> out;
  for (;;) {
    SAFEX_ASSIGN_OR_RETURN(bool have, s.Step());
    if (!have) break;
    auto c = CheckpointFrom(s);
    if (!c.ok()) {
      s.Reset();
      return c.status();
    }
    out.push_back(std::move(c).value());
  }
  return out;
}

// The integrity marker's row (schema.h): the last point a check verified.
struct Marker {
  int64_t verified_seq = 0;
  std::string verified_hash;  // 64 lowercase hex digits
  int64_t verified_ns = 0;
  int64_t full_ns = 0;  // when the last full check started
};

// The marker of log `log_id`, or nullopt when there is none that can be used: no table (a log
// made before markers, opened read-only) or no row, a read error (a damaged file: the full check
// that follows says what is wrong), a value of the wrong type or form, or another log's id.
std::optional<Marker> ReadMarker(sqlite3* db, const std::string& log_id) {
  auto s = Stmt::Prepare(db,
                         "SELECT log_id, verified_seq, verified_hash, verified_ns, full_ns FROM "
                         "integrity_marker WHERE id = 1");
  if (!s.ok()) return std::nullopt;
  auto have = s->Step();
  if (!have.ok() || !*have) return std::nullopt;
  std::optional<Marker> out;
  auto id = s->Value(0);
  auto seq = s->Value(1);
  auto hash = s->Value(2);
  auto checked = s->Value(3);
  auto full = s->Value(4);
  s->Reset();
  if (!id.ok() || !seq.ok() || !hash.ok() || !checked.ok() || !full.ok()) return out;
  const auto* id_text = std::get_if<std::string>(&*id);
  const auto* seq_int = std::get_if<int64_t>(&*seq);
  const auto* hash_text = std::get_if<std::string>(&*hash);
  const auto* checked_int = std::get_if<int64_t>(&*checked);
  const auto* full_int = std::get_if<int64_t>(&*full);
  if (id_text == nullptr || *id_text != log_id || seq_int == nullptr || *seq_int < 0 ||
      hash_text == nullptr || !DigestFromHex(*hash_text) || checked_int == nullptr ||
      full_int == nullptr) {
    return out;
  }
  out = Marker{*seq_int, *hash_text, *checked_int, *full_int};
  return out;
}

// A marker's full check is too old (or claims to be from the future, so its age is unknown).
bool FullCheckIsDue(const Marker& m, int64_t now_ns, std::chrono::seconds max_age) {
  if (m.full_ns > now_ns || max_age.count() <= 0) return true;
  constexpr int64_t kNsPerS = 1'000'000'000;
  if (max_age.count() >= std::numeric_limits<int64_t>::max() / kNsPerS) return false;
  return now_ns - m.full_ns > max_age.count() * kNsPerS;
}

// The stored hash of event `seq` (the genesis hash for 0), nullopt when there is no such event.
Result<std::optional<std::string>> StoredHash(sqlite3* db, const std::string& log_id, int64_t seq) {
  if (seq == 0) return std::optional<std::string>(ToHex(GenesisHash(log_id)));
  SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, "SELECT hash FROM events WHERE seq = ?1"));
  SAFEX_RETURN_IF_ERROR(s.BindInt(1, seq));
  SAFEX_ASSIGN_OR_RETURN(bool have, s.Step());
  if (!have) return std::optional<std::string>();
  std::optional<std::string> hash = s.Text(0);
  s.Reset();
  return hash;
}

VerifyReport Fail(VerifyReport rep, int64_t seq, std::string problem) {
  rep.ok = false;
  rep.first_bad_seq = seq;
  rep.problem = std::move(problem);
  return rep;
}

std::string MarkerSays(const Marker& m) {
  return "the integrity marker (written by the last successful check, not signed) says event " +
         std::to_string(m.verified_seq) + " was verified at " + FormatIso8601(m.verified_ns);
}

// The pooled sandbox an end event's run, or a session's opening, was handed (its evidence's
// "sandbox" field, written by the runner or the session table: "pooled ID made ..."), or "" for
// a run or session that made its own.
std::string PooledSandboxOf(const EventRow& row) {
  const bool session_opened =
      row.text(kColKind) == kKindSession && row.text(kColPurpose) == kSessionOpened;
  if (row.text(kColKind) != kKindEnd && !session_opened) return "";
  const std::string_view text = row.text(kColEnforcement);
  if (text.find("\"pooled ") == std::string_view::npos) return "";
  const nlohmann::json e = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!e.is_object() || !e.contains("fields") || !e["fields"].is_array()) return "";
  for (const nlohmann::json& f : e["fields"]) {
    // Comparisons only: a field of an unexpected shape is skipped, never an exception.
    if (!f.is_object() || !f.contains("name") || f["name"] != "sandbox") continue;
    if (!f.contains("observed") || !f["observed"].is_string()) return "";
    const std::string observed = f["observed"].get<std::string>();
    if (!observed.starts_with("pooled ")) return "";
    return observed.substr(7, observed.find(' ', 7) - 7);
  }
  return "";
}

// "uid N", or what stands for a missing uid, for the rules' messages.
std::string UidText(std::optional<int64_t> uid) {
  return uid ? "uid " + std::to_string(*uid) : "an unknown uid";
}

// The rules a full check holds events to beyond the chain, which span many events: a pooled
// sandbox ends once; a session is opened once, on an id that is no pooled sandbox's (a sandbox
// serves one run or one session), serves the one caller who opened it, numbers its exec runs
// 1, 2, 3, ... and has nothing after its close.
class ChainRules {
 public:
  // "" when `row` keeps the rules, else what is wrong.
  std::string Check(const EventRow& row) {
    std::string problem = CheckSandbox(row);
    if (problem.empty()) problem = CheckSession(row);
    if (problem.empty()) problem = CheckSessionExec(row);
    return problem;
  }

 private:
  struct Session {
    std::optional<int64_t> uid;  // the caller it serves
    int64_t opened_seq = 0;
    int64_t closed_seq = 0;  // 0: open
    uint64_t execs = 0;
  };

  std::string CheckSandbox(const EventRow& row) {
    const std::string id(row.text(kColRunId));
    const bool sandbox_event = row.text(kColKind) == kKindSandbox;
    const bool evicted = sandbox_event && row.text(kColPurpose) == kSandboxEvicted;
    const std::string sandbox = sandbox_event ? id : PooledSandboxOf(row);
    if (sandbox.empty()) return "";
    sandboxes_.insert(sandbox);
    if (sessions_.count(sandbox) > 0) {
      return "pooled sandbox " + sandbox + " has the id of a session: a sandbox serves one run " +
             "or one session";
    }
    if (sandbox_event && !evicted) return "";
    // A pooled sandbox ends once: it serves one run or one session, or it is evicted unused.
    const std::string ending = evicted                              ? "was evicted"
                               : row.text(kColKind) == kKindSession ? "served session " + id
                                                                    : "served run " + id;
    if (!endings_.emplace(sandbox, ending).second) {
      return "pooled sandbox " + sandbox + " " + ending + " but it already " + endings_[sandbox] +
             ": a pooled sandbox serves exactly one run or one session";
    }
    return "";
  }

  std::string CheckSession(const EventRow& row) {
    if (row.text(kColKind) != kKindSession) return "";
    const std::string id(row.text(kColRunId));
    const std::string what(row.text(kColPurpose));
    auto it = sessions_.find(id);
    if (what == kSessionOpened) {
      if (it != sessions_.end()) {
        return "session " + id + " opened twice (first at event " +
               std::to_string(it->second.opened_seq) + ")";
      }
      if (sandboxes_.count(id) > 0) {
        return "session " + id + " opened on the id of a pooled sandbox: a sandbox serves one " +
               "run or one session";
      }
      sessions_[id] = Session{row.integer(kColUid), row.seq(), 0, 0};
      return "";
    }
    if (it == sessions_.end()) return "session " + id + " has a " + what + " but was never opened";
    Session& session = it->second;
    if (session.closed_seq > 0) {
      return "session " + id + " has a " + what + " after its close (event " +
             std::to_string(session.closed_seq) + ")";
    }
    if (what == kSessionClosed) {
      session.closed_seq = row.seq();
      return "";
    }
    if (row.integer(kColUid) != session.uid) {
      return "session " + id + " served two callers: opened by " + UidText(session.uid) + ", " +
             what + " from " + UidText(row.integer(kColUid));
    }
    return "";
  }

  std::string CheckSessionExec(const EventRow& row) {
    const std::string_view purpose = row.text(kColPurpose);
    if (row.text(kColKind) != kKindStart || !purpose.starts_with(kSessionPurposePrefix)) return "";
    const std::string run(row.text(kColRunId));
    std::string id;
    uint64_t index = 0;
    if (!ParseSessionExecPurpose(purpose, &id, &index)) {
      return "run " + run + ": its purpose begins \"session \" but is not \"session ID exec N\"";
    }
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return "run " + run + " is an exec of session " + id + ", which was never opened";
    }
    Session& session = it->second;
    if (session.closed_seq > 0) {
      return "run " + run + " is an exec of session " + id + " after its close (event " +
             std::to_string(session.closed_seq) + ")";
    }
    if (row.integer(kColUid) != session.uid) {
      return "session " + id + " served two callers: opened by " + UidText(session.uid) + ", run " +
             run + " from " + UidText(row.integer(kColUid));
    }
    if (index != session.execs + 1) {
      return "run " + run + " is exec " + std::to_string(index) + " of session " + id +
             ", which had " + std::to_string(session.execs) +
             " before it: a session's execs are numbered 1, 2, 3, ...";
    }
    session.execs = index;
    return "";
  }

  std::map<std::string, std::string> endings_;  // pooled sandbox id -> how it ended
  std::set<std::string> sandboxes_;             // every pooled sandbox id seen
  std::map<std::string, Session> sessions_;
};

// Steps `s` (events ordered by seq) and checks that they run expected, expected+1, ... and that
// each hash chains from `prev`. true: intact, events/head_seq/head_hash filled; false: damaged,
// *rep says where. `wanted` (may be null) gets the hash at each seq it holds. `rules` (a full
// check; may be null): every event is held to them too, in log order.
Result<bool> ScanChain(Stmt& s, int64_t expected, Sha256Digest prev,
                       std::map<uint64_t, std::string>* wanted, VerifyReport* rep,
                       ChainRules* rules = nullptr) {
  const int64_t first = expected;
  auto bad = [rep](int64_t seq, std::string problem) {
    *rep = Fail(*rep, seq, std::move(problem));
    return false;
  };
  for (;;) {
    auto have = s.Step();
    if (!have.ok()) {
      if (have.status().code() == Status::Code::kDataLoss) {
        return bad(expected,
                   "reading event " + std::to_string(expected) + ": " + have.status().message());
      }
      return have.status();
    }
    if (!*have) break;
    auto row = ReadEventRow(s);
    if (!row.ok()) {
      s.Reset();
      return bad(expected, "event " + std::to_string(expected) + ": " + row.status().message());
    }
    int64_t seq = row->seq();
    if (seq != expected) {
      s.Reset();
      if (seq > expected) {
        return bad(seq, "event " + std::to_string(seq) + ": events " + std::to_string(expected) +
                            ".." + std::to_string(seq - 1) + " are missing (deleted)");
      }
      return bad(seq, "event " + std::to_string(seq) + ": out of sequence");
    }
    Sha256Digest h = ChainHash(prev, EncodeEvent(*row));
    if (ToHex(h) != row->hash) {
      s.Reset();
      return bad(seq, "event " + std::to_string(seq) + " (run " +
                          std::string(row->text(kColRunId)) + ", " +
                          std::string(row->text(kColKind)) +
                          "): hash mismatch: this event was edited, or one before it was removed, "
                          "inserted or reordered");
    }
    prev = h;
    if (rules != nullptr) {
      const std::string problem = rules->Check(*row);
      if (!problem.empty()) {
        s.Reset();
        return bad(seq, "event " + std::to_string(seq) + " (" + std::string(row->text(kColRunId)) +
                            "): " + problem);
      }
    }
    if (wanted != nullptr) {
      auto w = wanted->find(static_cast<uint64_t>(seq));
      if (w != wanted->end()) w->second = row->hash;
    }
    ++expected;
  }
  rep->events = static_cast<uint64_t>(expected - first);
  rep->head_seq = expected - 1;
  rep->head_hash = ToHex(prev);
  return true;
}

// PRAGMA integrity_check, the whole chain, the checkpoints (stored and options.external) and the
// integrity marker's claim: Verify() and CheckIntegrity(kFull).
Result<VerifyReport> FullCheck(sqlite3* db, const std::string& log_id,
                               const VerifyOptions& options) {
  VerifyReport rep;
  rep.kind = IntegrityCheck::kFull;
  if (options.integrity_check) {
    SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, "PRAGMA integrity_check"));
    std::string problems;
    int lines = 0;
    for (;;) {
      auto have = s.Step();
      if (!have.ok()) return Fail(rep, 0, "integrity_check: " + have.status().message());
      if (!*have) break;
      std::string line = s.Text(0);
      if (line != "ok" && lines++ < 5) problems += (problems.empty() ? "" : "; ") + line;
    }
    if (!problems.empty()) return Fail(rep, 0, "SQLite integrity_check failed: " + problems);
  }

  TxnGuard guard(db);
  SAFEX_RETURN_IF_ERROR(Exec(db, "BEGIN", "starting a read"));
  auto stored_checkpoints = ReadCheckpoints(db);
  if (!stored_checkpoints.ok()) {
    if (stored_checkpoints.status().code() == Status::Code::kDataLoss) {
      return Fail(rep, 0, stored_checkpoints.status().message());
    }
    return stored_checkpoints.status();
  }
  std::vector<std::pair<std::string, Checkpoint>> checkpoints;
  for (size_t i = 0; i < stored_checkpoints->size(); ++i) {
    checkpoints.emplace_back("checkpoint #" + std::to_string(i + 1) + " in the database",
                             (*stored_checkpoints)[i]);
  }
  if (options.external) checkpoints.emplace_back("the checkpoint file", *options.external);
  // Read in the same snapshot as the chain, so every event it names is in it.
  const std::optional<Marker> marker = ReadMarker(db, log_id);
  // Hashes the chain must have at the counts that checkpoints and the marker name.
  std::map<uint64_t, std::string> wanted;
  for (const auto& [name, c] : checkpoints) wanted[c.event_count];
  if (marker) wanted[static_cast<uint64_t>(marker->verified_seq)];

  const Sha256Digest genesis = GenesisHash(log_id);
  if (wanted.count(0)) wanted[0] = ToHex(genesis);
  SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, SelectEventsSql(db, "")));
  ChainRules rules;
  SAFEX_ASSIGN_OR_RETURN(bool intact, ScanChain(s, 1, genesis, &wanted, &rep, &rules));
  if (!intact) return rep;
  SAFEX_RETURN_IF_ERROR(Exec(db, "COMMIT", "ending a read"));

  for (const auto& [name, c] : checkpoints) {
    Status sig = VerifyCheckpointSignature(c);
    if (!sig.ok()) return Fail(rep, 0, name + ": " + sig.message());
    if (options.trusted_public_key && c.public_key != *options.trusted_public_key) {
      return Fail(rep, 0,
                  name + " is signed by key " + c.public_key.substr(0, 16) +
                      "..., not by the trusted key " + options.trusted_public_key->substr(0, 16) +
                      "...");
    }
    if (c.log_id != log_id) {
      return Fail(
          rep, 0,
          name + " belongs to another log (log id " + c.log_id + ", this log is " + log_id + ")");
    }
    if (c.event_count > rep.events) {
      return Fail(rep, static_cast<int64_t>(rep.events) + 1,
                  name + " (signed " + FormatIso8601(c.time_ns) + ") covers " +
                      std::to_string(c.event_count) + " events but the log has only " +
                      std::to_string(rep.events) + ": the log was truncated");
    }
    if (wanted[c.event_count] != c.head_hash) {
      return Fail(rep, static_cast<int64_t>(c.event_count),
                  name + " (signed " + FormatIso8601(c.time_ns) + "): event " +
                      std::to_string(c.event_count) +
                      " does not have the signed hash: the log was rewritten");
    }
    ++rep.checkpoints;
  }
  if (marker) {
    if (marker->verified_seq > rep.head_seq) {
      return Fail(rep, rep.head_seq + 1,
                  MarkerSays(*marker) + ", but the log has only " + std::to_string(rep.head_seq) +
                      " events: the log was truncated, or the marker edited");
    }
    if (wanted[static_cast<uint64_t>(marker->verified_seq)] != marker->verified_hash) {
      return Fail(
          rep, marker->verified_seq,
          MarkerSays(*marker) + " with another hash: the log was rewritten, or the marker edited");
    }
  }
  rep.ok = true;
  return rep;
}

// The chain from the marker's event to the head, in one snapshot.
Result<VerifyReport> IncrementalCheck(sqlite3* db, const std::string& log_id, const Marker& m) {
  VerifyReport rep;
  rep.kind = IntegrityCheck::kIncremental;
  TxnGuard guard(db);
  SAFEX_RETURN_IF_ERROR(Exec(db, "BEGIN", "starting a read"));
  auto stored = StoredHash(db, log_id, m.verified_seq);
  if (!stored.ok()) {
    if (stored.status().code() == Status::Code::kDataLoss) {
      return Fail(
          rep, m.verified_seq,
          "reading event " + std::to_string(m.verified_seq) + ": " + stored.status().message());
    }
    return stored.status();
  }
  if (!*stored) {
    return Fail(rep, m.verified_seq,
                MarkerSays(m) +
                    ", but the log has no such event: the log was truncated, or the "
                    "marker edited");
  }
  if (**stored != m.verified_hash) {
    return Fail(rep, m.verified_seq,
                MarkerSays(m) + " with another hash: the log was rewritten, or the marker edited");
  }
  SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, SelectEventsSql(db, "WHERE seq > ?1")));
  SAFEX_RETURN_IF_ERROR(s.BindInt(1, m.verified_seq));
  // ReadMarker checked the form of the hash.
  SAFEX_ASSIGN_OR_RETURN(bool intact, ScanChain(s, m.verified_seq + 1,
                                                *DigestFromHex(m.verified_hash), nullptr, &rep));
  if (!intact) return rep;
  SAFEX_RETURN_IF_ERROR(Exec(db, "COMMIT", "ending a read"));
  rep.ok = true;
  return rep;
}

// What the log already holds under one id (a run's, a pooled sandbox's or a session's), read by
// Append under the write lock.
struct IdHistory {
  bool any = false;
  bool started = false;
  bool ended = false;  // an end or an interruption
  int sandbox_events = 0;
  bool session_opened = false;
  bool session_closed = false;
  std::optional<int64_t> opener_uid;  // the caller the session serves
};

// `run_events`: SELECT kind, purpose, uid FROM events WHERE run_id = ?1.
Result<IdHistory> ReadIdHistory(Stmt& run_events, std::string_view id) {
  IdHistory h;
  SAFEX_RETURN_IF_ERROR(run_events.BindText(1, id));
  for (;;) {
    SAFEX_ASSIGN_OR_RETURN(bool have, run_events.Step());
    if (!have) break;
    h.any = true;
    const std::string kind = run_events.Text(0);
    h.started |= kind == kKindStart;
    h.ended |= kind == kKindEnd || kind == kKindInterrupted;
    h.sandbox_events += kind == kKindSandbox;
    if (kind != kKindSession) continue;
    const std::string what = run_events.Text(1);
    if (what == kSessionOpened) {
      h.session_opened = true;
      if (!run_events.IsNull(2)) h.opener_uid = run_events.Int(2);
    }
    h.session_closed |= what == kSessionClosed;
  }
  return h;
}

// The order of one id's events: a run starts (or is refused) on a new id and ends once; a pooled
// sandbox is made on a new id and evicted at most once; an access names an id in the log; a
// session is opened on a new id, takes files from its caller only, and is closed once, after
// which nothing more happens to it.
Status CheckIdOrder(const EventRow& row, const IdHistory& h) {
  const std::string_view kind = row.text(kColKind);
  const std::string id(row.text(kColRunId));
  const std::string_view what = row.text(kColPurpose);
  const bool opens = kind == kKindStart || kind == kKindRefusal ||
                     (kind == kKindSandbox && what == kSandboxMade) ||
                     (kind == kKindSession && what == kSessionOpened);
  if (opens && h.any) {
    const bool run = kind == kKindStart || kind == kKindRefusal;
    return Status::FailedPrecondition((run ? "run id " : "id ") + id +
                                      " is already in the audit log");
  }
  if (kind == kKindSandbox && what != kSandboxMade && (h.sandbox_events != 1 || h.started)) {
    return Status::FailedPrecondition("sandbox " + id + " was not made, or was already evicted");
  }
  if (kind == kKindAccess && !h.any) {
    return Status::FailedPrecondition("run " + id + " is not in the audit log");
  }
  if (kind == kKindEnd || kind == kKindInterrupted) {
    if (!h.started) return Status::FailedPrecondition("run " + id + " has no start event to end");
    if (h.ended) return Status::FailedPrecondition("run " + id + " has already ended");
  }
  if (kind != kKindSession || what == kSessionOpened) return Status::Ok();
  if (!h.session_opened) return Status::FailedPrecondition("session " + id + " was never opened");
  if (h.session_closed) return Status::FailedPrecondition("session " + id + " is closed");
  if (what != kSessionClosed && row.integer(kColUid) != h.opener_uid) {
    return Status::FailedPrecondition("session " + id + " serves " + UidText(h.opener_uid) +
                                      " only, not " + UidText(row.integer(kColUid)) +
                                      ": a session serves one caller");
  }
  return Status::Ok();
}

// A run whose purpose names a session (SessionExecPurpose) is that session's next exec: the
// session is open, the run's caller is the session's, and N is one more than the session's exec
// runs so far (`session_execs` counts starts whose purpose is in [?1, ?2)).
Status CheckSessionExecStart(const EventRow& row, Stmt& run_events, Stmt& session_execs) {
  std::string session;
  uint64_t index = 0;
  if (row.text(kColKind) != kKindStart ||
      !ParseSessionExecPurpose(row.text(kColPurpose), &session, &index)) {
    return Status::Ok();  // RowFromStart let through no other purpose that begins "session "
  }
  const std::string run(row.text(kColRunId));
  SAFEX_ASSIGN_OR_RETURN(IdHistory h, ReadIdHistory(run_events, session));
  if (!h.session_opened) {
    return Status::FailedPrecondition("run " + run + ": session " + session + " was never opened");
  }
  if (h.session_closed) {
    return Status::FailedPrecondition("run " + run + ": session " + session + " is closed");
  }
  if (row.integer(kColUid) != h.opener_uid) {
    return Status::FailedPrecondition(
        "run " + run + ": session " + session + " serves " + UidText(h.opener_uid) + " only, not " +
        UidText(row.integer(kColUid)) + ": a session serves one caller");
  }
  const std::string prefix = SessionExecPurposePrefix(session);
  SAFEX_RETURN_IF_ERROR(session_execs.BindText(1, prefix));
  SAFEX_RETURN_IF_ERROR(session_execs.BindText(2, prefix + ":"));  // ':' sorts right after '9'
  SAFEX_ASSIGN_OR_RETURN(bool have, session_execs.Step());
  const uint64_t execs = have ? static_cast<uint64_t>(session_execs.Int(0)) : 0;
  session_execs.Reset();
  if (index != execs + 1) {
    return Status::FailedPrecondition("run " + run + " cannot be exec " + std::to_string(index) +
                                      " of session " + session + ": it has " +
                                      std::to_string(execs) + " exec runs, so the next is exec " +
                                      std::to_string(execs + 1));
  }
  return Status::Ok();
}

}  // namespace

struct AuditLog::Impl {
  DbPtr db;
  BusyWait busy;
  bool memory = false;
  dev_t dev = 0;
  ino_t ino = 0;
  // Writers' statements, prepared once per connection.
  Stmt begin_immediate;
  Stmt commit;
  Stmt head;
  Stmt run_events;
  Stmt session_execs;
  Stmt insert;
  // Set if synchronous=FULL could not be restored after a marker write: appends would not be
  // durable, so they are refused.
  bool durability_lost = false;
};

AuditLog::~AuditLog() = default;

std::string NewRunId() {
  // UUIDv7 (RFC 9562): 48-bit unix milliseconds, version 7, 74 random bits, variant 10.
  uint64_t ms = static_cast<uint64_t>(NowNs() / 1'000'000);
  std::string rnd = RandomHex(10);  // 80 random bits, 74 used
  char buf[64];
  std::snprintf(buf, sizeof buf, "%08llx-%04llx-7%.3s-%x%.3s-%.12s",
                static_cast<unsigned long long>(ms >> 16),
                static_cast<unsigned long long>(ms & 0xffff), rnd.data(),
                8 + (HexDigitValue(rnd[3]) & 3), rnd.data() + 4, rnd.data() + 7);
  return buf;
}

Result<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& path,
                                                 const AuditOptions& options) {
  std::unique_ptr<AuditLog> log(new AuditLog());
  log->path_ = path;
  log->options_ = options;
  log->impl_ = std::make_unique<Impl>();
  Status st = log->Init();
  if (st.code() == Status::Code::kDataLoss) {
    return Status::DataLoss("audit log " + path +
                            " is corrupt or not an SQLite database: " + st.message());
  }
  if (!st.ok()) return st.With("audit log " + path);
  return log;
}

Status AuditLog::Init() {
  Impl& im = *impl_;
  im.memory = path_ == kMemoryPath;
  if (!im.memory) {
    if (path_.empty()) return Status::InvalidArgument("empty path");
    struct stat st {};
    if (stat(path_.c_str(), &st) != 0) {
      if (errno != ENOENT) return FileErrno("stat", path_, errno);
      if (options_.read_only || !options_.create) {
        return Status::NotFound("no audit log at " + path_);
      }
      std::string dir = ParentDir(path_);
      if (mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) {
        return FileErrno("mkdir", dir, errno);
      }
      // Created here, not by SQLite, so that the mode is ours (SQLite gives its -wal and -shm
      // files the same mode) and a symlink planted at the path is refused.
      UniqueFd fd(open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640));
      if (!fd) return FileErrno("open", path_, errno);
    } else if (!S_ISREG(st.st_mode)) {
      return Status::FailedPrecondition(path_ + " is not a regular file");
    }
  }

  int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_NOFOLLOW;
  flags |= options_.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (im.memory) flags |= SQLITE_OPEN_CREATE | SQLITE_OPEN_MEMORY;
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path_.c_str(), &raw, flags, nullptr);
  im.db.reset(raw);
  if (rc != SQLITE_OK) return SqliteStatus(raw, rc, "opening");
  sqlite3* db = im.db.get();
  sqlite3_extended_result_codes(db, 1);
  im.busy.timeout_ns = static_cast<int64_t>(options_.busy_timeout_ms) * 1'000'000;
  im.busy.rng = static_cast<uint64_t>(MonotonicNs()) ^ (static_cast<uint64_t>(getpid()) << 32);
  sqlite3_busy_handler(db, BusyHandler, &im.busy);
  if (!options_.read_only && !im.memory) {
    // Keep the -wal and -shm files when the last writer closes, so that auditors without write
    // access to the directory can still open the log read-only (SQLite needs them to exist).
    int persist = 1;
    sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    // A `safex run` process opens the log, appends two events and exits; a checkpoint at every
    // close would add two more fsyncs per run. Commits still checkpoint once the WAL reaches
    // SQLite's auto-checkpoint size (1000 pages), so the WAL stays bounded.
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    // Each process that opens the log alone rebuilds the WAL index by reading the whole WAL; a
    // smaller WAL (checkpointed every 64 pages, about a dozen runs) keeps that cheap.
    sqlite3_wal_autocheckpoint(db, 64);
  }
  if (!options_.read_only && sqlite3_db_readonly(db, "main") == 1) {
    return Status::PermissionDenied(
        "the file can only be opened read-only (permissions or a read-only file system); no run "
        "may start without a writable audit log");
  }
  // Durability on every connection: with WAL, FULL syncs the WAL at every commit.
  SAFEX_RETURN_IF_ERROR(Exec(db, "PRAGMA synchronous=FULL", "setting synchronous=FULL"));

  int32_t app_id = 0;
  {
    SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, "PRAGMA application_id"));
    auto row = s.Step();
    if (!row.ok()) {
      return row.status();
    }
    if (*row) app_id = static_cast<int32_t>(s.Int(0));
    s.Reset();
  }
  if (app_id == 0) {
    if (options_.read_only) {
      return Status::FailedPrecondition("not a safex audit log (no safex schema)");
    }
    SAFEX_RETURN_IF_ERROR(CreateSchemaIfNew());
  } else if (app_id != internal::kApplicationId) {
    return Status::FailedPrecondition(
        "not a safex audit log (another application's database); refusing to touch it");
  }

  {
    SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, "PRAGMA user_version"));
    SAFEX_ASSIGN_OR_RETURN(bool row, s.Step());
    int64_t version = row ? s.Int(0) : 0;
    s.Reset();
    if (version < internal::kOldestReadableSchemaVersion || version > internal::kSchemaVersion) {
      return Status::FailedPrecondition("schema version " + std::to_string(version) +
                                        " is not supported (this safex reads " +
                                        std::to_string(internal::kOldestReadableSchemaVersion) +
                                        " to " + std::to_string(internal::kSchemaVersion) + ")");
    }
    if (version < internal::kSchemaVersion && !options_.read_only) {
      SAFEX_RETURN_IF_ERROR(MigrateToCurrentSchema(version));
    }
  }
  if (!options_.read_only) {
    // Logs made before the marker existed get its table from their first writer.
    SAFEX_ASSIGN_OR_RETURN(
        Stmt s, Stmt::Prepare(db,
                              "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND "
                              "name = ?1"));
    SAFEX_RETURN_IF_ERROR(s.BindText(1, internal::kIntegrityMarkerTable));
    SAFEX_ASSIGN_OR_RETURN(bool row, s.Step());
    const bool have_marker_table = row && s.Int(0) > 0;
    s.Reset();
    if (!have_marker_table) {
      SAFEX_RETURN_IF_ERROR(
          Exec(db, internal::kCreateIntegrityMarkerSql, "creating the integrity marker table"));
    }
  }
  if (!options_.read_only && !im.memory) {
    // WAL persists in the file; restore it if someone switched the log to another mode.
    SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, "PRAGMA journal_mode"));
    SAFEX_ASSIGN_OR_RETURN(bool row, s.Step());
    std::string mode = row ? s.Text(0) : "";
    s.Reset();
    if (mode != "wal") {
      SAFEX_RETURN_IF_ERROR(Exec(db, "PRAGMA journal_mode=WAL", "switching to WAL"));
    }
  }
  if (options_.max_db_bytes > 0) {
    SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, "PRAGMA page_size"));
    SAFEX_ASSIGN_OR_RETURN(bool row, s.Step());
    int64_t page = row && s.Int(0) > 0 ? s.Int(0) : 4096;
    s.Reset();
    std::string sql = "PRAGMA max_page_count=" +
                      std::to_string(std::max<uint64_t>(1, options_.max_db_bytes / page));
    SAFEX_RETURN_IF_ERROR(Exec(db, sql.c_str(), "capping the database size"));
  }
  {
    SAFEX_ASSIGN_OR_RETURN(Stmt s,
                           Stmt::Prepare(db, "SELECT value FROM meta WHERE key = 'log_id'"));
    SAFEX_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return Status::DataLoss("meta table has no log_id");
    log_id_ = s.Text(0);
    s.Reset();
  }
  if (!im.memory) {
    struct stat st {};
    if (stat(path_.c_str(), &st) != 0) return FileErrno("stat", path_, errno);
    im.dev = st.st_dev;
    im.ino = st.st_ino;
  }
  if (!options_.read_only) {
    SAFEX_ASSIGN_OR_RETURN(im.begin_immediate, Stmt::Prepare(db, "BEGIN IMMEDIATE"));
    SAFEX_ASSIGN_OR_RETURN(im.commit, Stmt::Prepare(db, "COMMIT"));
    SAFEX_ASSIGN_OR_RETURN(im.head, Stmt::Prepare(db,
                                                  "SELECT seq, hash FROM events ORDER BY seq DESC "
                                                  "LIMIT 1"));
    SAFEX_ASSIGN_OR_RETURN(
        im.run_events,
        Stmt::Prepare(db, "SELECT kind, purpose, uid FROM events WHERE run_id = ?1"));
    // A range of the events_start_purpose index: the session's exec runs.
    SAFEX_ASSIGN_OR_RETURN(im.session_execs,
                           Stmt::Prepare(db,
                                         "SELECT count(*) FROM events WHERE kind = 'start' AND "
                                         "purpose >= ?1 AND purpose < ?2"));
    std::string insert = "INSERT INTO events (" + EventColumnList() + ", hash) VALUES (";
    for (size_t i = 1; i <= kNumEventColumns + 1; ++i) {
      insert += "?" + std::to_string(i) + (i <= kNumEventColumns ? ", " : ")");
    }
    SAFEX_ASSIGN_OR_RETURN(im.insert, Stmt::Prepare(db, insert));
  }
  return Status::Ok();
}

// A log of an older schema, opened by a writer: brought to the current schema in one
// transaction, under the write lock (another writer may have done it first: the version is read
// again under the lock). Old rows are untouched, so their hashes still verify (event_row.h).
Status AuditLog::MigrateToCurrentSchema(int64_t opened_version) {
  sqlite3* db = impl_->db.get();
  TxnGuard guard(db);
  SAFEX_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE", "locking the audit log to migrate it"));
  SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, "PRAGMA user_version"));
  SAFEX_ASSIGN_OR_RETURN(bool row, s.Step());
  const int64_t version = row ? s.Int(0) : opened_version;
  s.Reset();
  // Each step from the version found, in order; the views once at the end.
  if (version < internal::kSchemaVersion) {
    if (version == 1) {
      SAFEX_RETURN_IF_ERROR(Exec(db, internal::kMigrateV1ToV2Sql, "adding the version 2 columns"));
    }
    SAFEX_RETURN_IF_ERROR(Exec(db, internal::RebuildEventsSql().c_str(),
                               "rebuilding the events table for the current version"));
    SAFEX_RETURN_IF_ERROR(Exec(db, internal::kCreateViewsSql, "recreating the views"));
    SAFEX_ASSIGN_OR_RETURN(Stmt ins,
                           Stmt::Prepare(db, "INSERT INTO meta (key, value) VALUES (?1, ?2)"));
    SAFEX_RETURN_IF_ERROR(
        ins.BindText(1, "migrated_to_" + std::to_string(internal::kSchemaVersion) + "_ns"));
    SAFEX_RETURN_IF_ERROR(ins.BindText(2, std::to_string(NowNs())));
    SAFEX_RETURN_IF_ERROR(ins.Step().status());
    const std::string stamp = "PRAGMA user_version=" + std::to_string(internal::kSchemaVersion);
    SAFEX_RETURN_IF_ERROR(Exec(db, stamp.c_str(), "stamping the schema version"));
  }
  return Exec(db, "COMMIT", "committing the migration");
}

Status AuditLog::CreateSchemaIfNew() {
  sqlite3* db = impl_->db.get();
  if (!impl_->memory) {
    // Changing the journal mode needs an exclusive lock, for which SQLite does not always call
    // the busy handler; concurrent first opens retry here.
    Status st;
    for (int attempt = 0; attempt < 200; ++attempt) {
      st = Exec(db, "PRAGMA journal_mode=WAL", "switching to WAL");
      if (st.ok() || st.code() != Status::Code::kUnavailable) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    SAFEX_RETURN_IF_ERROR(st);
  }
  TxnGuard guard(db);
  SAFEX_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE", "locking the new audit log"));
  int64_t app_id = 0;
  int64_t objects = 0;
  {
    SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, "PRAGMA application_id"));
    SAFEX_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) app_id = s.Int(0);
    s.Reset();
    SAFEX_ASSIGN_OR_RETURN(Stmt t, Stmt::Prepare(db, "SELECT count(*) FROM sqlite_schema"));
    SAFEX_ASSIGN_OR_RETURN(row, t.Step());
    if (row) objects = t.Int(0);
    t.Reset();
  }
  if (app_id == internal::kApplicationId) {
    // Another process created it between our first look and the lock.
    return Exec(db, "COMMIT", "committing");
  }
  if (app_id != 0 || objects != 0) {
    return Status::FailedPrecondition(
        "not a safex audit log (an SQLite database with other tables); refusing to touch it");
  }
  SAFEX_RETURN_IF_ERROR(Exec(db, internal::kCreateSchemaSql, "creating the schema"));
  SAFEX_RETURN_IF_ERROR(Exec(db, internal::kCreateViewsSql, "creating the views"));
  SAFEX_RETURN_IF_ERROR(
      Exec(db, internal::kCreateIntegrityMarkerSql, "creating the integrity marker table"));
  std::string pragmas = "PRAGMA application_id=" + std::to_string(internal::kApplicationId) +
                        "; PRAGMA user_version=" + std::to_string(internal::kSchemaVersion) + ";";
  SAFEX_RETURN_IF_ERROR(Exec(db, pragmas.c_str(), "stamping the schema"));
  SAFEX_ASSIGN_OR_RETURN(Stmt ins,
                         Stmt::Prepare(db, "INSERT INTO meta (key, value) VALUES (?1, ?2)"));
  const std::pair<std::string, std::string> meta[] = {
      {"format", "safex-audit"},
      {"schema_version", std::to_string(internal::kSchemaVersion)},
      {"log_id", RandomHex(16)},
      {"created_ns", std::to_string(NowNs())},
  };
  for (const auto& [k, v] : meta) {
    SAFEX_RETURN_IF_ERROR(ins.BindText(1, k));
    SAFEX_RETURN_IF_ERROR(ins.BindText(2, v));
    SAFEX_RETURN_IF_ERROR(ins.Step().status());
  }
  return Exec(db, "COMMIT", "committing the schema");
}

Status AuditLog::CheckWritable() {
  if (options_.read_only) return Status::FailedPrecondition("audit log opened read-only");
  Impl& im = *impl_;
  if (!im.memory) {
    struct stat st {};
    if (stat(path_.c_str(), &st) != 0) {
      return FileErrno("audit log: stat", path_, errno).With("the audit log file is gone");
    }
    if (st.st_dev != im.dev || st.st_ino != im.ino) {
      return Status::FailedPrecondition("audit log " + path_ + " was replaced since it was opened");
    }
    struct statvfs vfs {};
    std::string dir = ParentDir(path_);
    if (statvfs(dir.c_str(), &vfs) != 0) return FileErrno("statvfs", dir, errno);
    uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (free_bytes < options_.min_free_bytes) {
      return Status::ResourceExhausted("audit log " + path_ + ": only " +
                                       std::to_string(free_bytes) + " bytes free on " + dir +
                                       " (need " + std::to_string(options_.min_free_bytes) + ")");
    }
    if (vfs.f_flag & ST_RDONLY) {
      return Status::PermissionDenied("audit log " + path_ + ": file system is read-only");
    }
  }
  TxnGuard guard(im.db.get());
  Status st = im.begin_immediate.Step().status();
  if (!st.ok()) return st.With("audit log " + path_ + ": cannot take the write lock");
  return Exec(im.db.get(), "ROLLBACK", "releasing the write lock");
}

Status AuditLog::Append(EventRow row, EventRef* appended) {
  if (options_.read_only) return Status::FailedPrecondition("audit log opened read-only");
  Impl& im = *impl_;
  if (im.durability_lost) {
    return Status::Internal("this connection lost synchronous=FULL; reopen the audit log");
  }
  sqlite3* db = im.db.get();
  TxnGuard guard(db);
  SAFEX_RETURN_IF_ERROR(im.begin_immediate.Step().status());

  // Under the write lock: the head cannot move until COMMIT.
  int64_t head_seq = 0;
  Sha256Digest prev = GenesisHash(log_id_);
  {
    SAFEX_ASSIGN_OR_RETURN(bool have, im.head.Step());
    if (have) {
      head_seq = im.head.Int(0);
      auto d = DigestFromHex(im.head.Text(1));
      im.head.Reset();
      if (!d)
        return Status::DataLoss("the newest event's hash is malformed; run safex audit verify");
      prev = *d;
    }
  }

  SAFEX_ASSIGN_OR_RETURN(IdHistory history, ReadIdHistory(im.run_events, row.text(kColRunId)));
  SAFEX_RETURN_IF_ERROR(CheckIdOrder(row, history));
  SAFEX_RETURN_IF_ERROR(CheckSessionExecStart(row, im.run_events, im.session_execs));

  row.values[kColSeq] = head_seq + 1;
  const std::string encoding = EncodeEvent(row);
  row.hash = ToHex(ChainHash(prev, encoding));
  for (size_t i = 0; i < kNumEventColumns; ++i) {
    SAFEX_RETURN_IF_ERROR(im.insert.Bind(static_cast<int>(i + 1), row.values[i]));
  }
  SAFEX_RETURN_IF_ERROR(im.insert.BindText(static_cast<int>(kNumEventColumns + 1), row.hash));
  SAFEX_RETURN_IF_ERROR(im.insert.Step().status());
  // The event exists only once COMMIT returns: FULL sync has then written the WAL to disk.
  SAFEX_RETURN_IF_ERROR(im.commit.Step().status());
  if (appended != nullptr) {
    appended->seq = head_seq + 1;
    appended->hash = row.hash;
  }
  return Status::Ok();
}

Status AuditLog::RecordAccess(const Access& access, EventRef* appended) {
  SAFEX_ASSIGN_OR_RETURN(EventRow row, RowFromAccess(access, NowNs()));
  return Append(std::move(row), appended).With("audit log " + path_ + ": recording an access");
}

Status AuditLog::RecordSandbox(const SandboxEvent& event, EventRef* appended) {
  SAFEX_ASSIGN_OR_RETURN(EventRow row, RowFromSandbox(event, NowNs()));
  return Append(std::move(row), appended)
      .With("audit log " + path_ + ": recording a pooled sandbox");
}

Status AuditLog::RecordSession(const SessionEvent& event, EventRef* appended) {
  SAFEX_ASSIGN_OR_RETURN(EventRow row, RowFromSession(event, NowNs()));
  return Append(std::move(row), appended).With("audit log " + path_ + ": recording a session");
}

Status AuditLog::RecordStart(const RunStart& start, EventRef* appended) {
  SAFEX_ASSIGN_OR_RETURN(EventRow row, RowFromStart(start, NowNs()));
  return Append(std::move(row), appended).With("audit log " + path_ + ": recording run start");
}

Status AuditLog::RecordEnd(const RunEnd& end, EventRef* appended) {
  SAFEX_ASSIGN_OR_RETURN(EventRow row, RowFromEnd(end, NowNs()));
  return Append(std::move(row), appended).With("audit log " + path_ + ": recording run end");
}

Status AuditLog::RecordRefusal(const Refusal& refusal, EventRef* appended) {
  Refusal r = refusal;
  if (r.run_id.empty()) r.run_id = NewRunId();
  SAFEX_ASSIGN_OR_RETURN(EventRow row, RowFromRefusal(r, NowNs()));
  return Append(std::move(row), appended).With("audit log " + path_ + ": recording a refusal");
}

Status AuditLog::RecordInterrupted(const Interrupted& interrupted, EventRef* appended) {
  SAFEX_ASSIGN_OR_RETURN(EventRow row, RowFromInterrupted(interrupted, NowNs()));
  return Append(std::move(row), appended)
      .With("audit log " + path_ + ": recording an interrupted run");
}

Result<std::vector<std::pair<std::string, int64_t>>> AuditLog::UnfinishedRunStarts() {
  SAFEX_ASSIGN_OR_RETURN(
      Stmt s, Stmt::Prepare(impl_->db.get(),
                            "SELECT run_id, start_ns FROM runs WHERE state = 'running' "
                            "ORDER BY start_seq"));
  std::vector<std::pair<std::string, int64_t>> out;
  for (;;) {
    SAFEX_ASSIGN_OR_RETURN(bool have, s.Step());
    if (!have) break;
    out.emplace_back(s.Text(0), s.Int(1));
  }
  return out;
}

// Two queries instead of the `sandboxes` view's per-sandbox scan: the made, never-evicted ones
// (indexed by run id), then every end event that names a pooled sandbox, once.
Result<std::vector<AuditLog::UnendedSandbox>> AuditLog::UnendedSandboxes() {
  SAFEX_ASSIGN_OR_RETURN(
      Stmt made,
      Stmt::Prepare(
          impl_->db.get(),
          "SELECT m.run_id, m.pid, m.time_ns, m.policy_name, m.plan_digest FROM events AS m "
          "WHERE m.kind = 'sandbox' AND m.purpose = 'made' AND NOT EXISTS "
          "(SELECT 1 FROM events AS e WHERE e.run_id = m.run_id AND "
          "e.kind = 'sandbox' AND e.purpose = 'evicted') ORDER BY m.seq"));
  std::vector<UnendedSandbox> out;
  for (;;) {
    SAFEX_ASSIGN_OR_RETURN(bool have, made.Step());
    if (!have) break;
    UnendedSandbox u;
    u.sandbox_id = made.Text(0);
    if (!made.IsNull(1)) u.maker_pid = static_cast<int32_t>(made.Int(1));
    u.made_ns = made.Int(2);
    u.policy_name = made.Text(3);
    u.plan_digest = made.Text(4);
    out.push_back(std::move(u));
  }
  if (out.empty()) return out;
  SAFEX_ASSIGN_OR_RETURN(Stmt served,
                         Stmt::Prepare(impl_->db.get(),
                                       "SELECT enforcement FROM events WHERE kind IN ('end', "
                                       "'session') AND instr(enforcement, '\"pooled ') > 0"));
  std::set<std::string> named;
  for (;;) {
    SAFEX_ASSIGN_OR_RETURN(bool have, served.Step());
    if (!have) break;
    const std::string text = served.Text(0);
    for (size_t at = text.find("\"pooled "); at != std::string::npos;
         at = text.find("\"pooled ", at + 1)) {
      const size_t begin = at + 8;
      named.insert(text.substr(begin, text.find(' ', begin) - begin));
    }
  }
  std::erase_if(out, [&named](const UnendedSandbox& u) { return named.count(u.sandbox_id) > 0; });
  return out;
}

// As UnendedSandboxes: one pass over the events for the opened ones, each looked up by id
// (events_run_id) for its close.
Result<std::vector<AuditLog::OpenSession>> AuditLog::OpenSessions() {
  SAFEX_ASSIGN_OR_RETURN(
      Stmt s, Stmt::Prepare(impl_->db.get(),
                            "SELECT o.run_id, o.uid, o.pid, o.time_ns, o.policy_name, "
                            "o.plan_digest FROM events AS o WHERE o.kind = 'session' AND "
                            "o.purpose = 'opened' AND NOT EXISTS (SELECT 1 FROM events AS c "
                            "WHERE c.run_id = o.run_id AND c.kind = 'session' AND "
                            "c.purpose = 'closed') ORDER BY o.seq"));
  std::vector<OpenSession> out;
  for (;;) {
    SAFEX_ASSIGN_OR_RETURN(bool have, s.Step());
    if (!have) break;
    OpenSession o;
    o.session_id = s.Text(0);
    if (!s.IsNull(1)) o.opener_uid = static_cast<uint32_t>(s.Int(1));
    if (!s.IsNull(2)) o.opener_pid = static_cast<int32_t>(s.Int(2));
    o.opened_ns = s.Int(3);
    o.policy_name = s.Text(4);
    o.plan_digest = s.Text(5);
    out.push_back(std::move(o));
  }
  return out;
}

Result<std::vector<AuditLog::SessionSummary>> AuditLog::ListSessions(uint64_t limit) {
  std::vector<SessionSummary> out;
  SAFEX_ASSIGN_OR_RETURN(
      Stmt has, Stmt::Prepare(impl_->db.get(),
                              "SELECT count(*) FROM sqlite_schema WHERE type = 'view' AND "
                              "name = 'sessions'"));
  SAFEX_ASSIGN_OR_RETURN(bool row, has.Step());
  if (!row || has.Int(0) == 0) return out;  // a log from before sessions
  SAFEX_ASSIGN_OR_RETURN(
      Stmt s, Stmt::Prepare(impl_->db.get(),
                            "SELECT session_id, opened_ns, uid, policy_name, plan_digest, backend, "
                            "closed_ns, closed_because, execs, files_in, files_out FROM sessions "
                            "ORDER BY seq DESC LIMIT ?1"));
  const int64_t n = limit == 0 || limit > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                        ? std::numeric_limits<int64_t>::max()
                        : static_cast<int64_t>(limit);
  SAFEX_RETURN_IF_ERROR(s.Bind(1, SqlValue(n)));
  for (;;) {
    SAFEX_ASSIGN_OR_RETURN(bool have, s.Step());
    if (!have) break;
    SessionSummary r;
    r.session_id = s.Text(0);
    r.opened_ns = s.Int(1);
    if (!s.IsNull(2)) r.uid = static_cast<uint32_t>(s.Int(2));
    r.policy_name = s.Text(3);
    r.plan_digest = s.Text(4);
    r.backend = s.Text(5);
    if (!s.IsNull(6)) r.closed_ns = s.Int(6);
    r.closed_because = s.Text(7);
    r.execs = static_cast<uint64_t>(s.Int(8));
    r.files_in = static_cast<uint64_t>(s.Int(9));
    r.files_out = static_cast<uint64_t>(s.Int(10));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<std::string>> AuditLog::UnfinishedRuns() {
  SAFEX_ASSIGN_OR_RETURN(auto runs, UnfinishedRunStarts());
  std::vector<std::string> out;
  for (auto& [run_id, start_ns] : runs) out.push_back(std::move(run_id));
  return out;
}

Result<std::vector<RunSummary>> AuditLog::ListRuns(const RunFilter& f) {
  std::string sql = "SELECT " + RunColumns(impl_->db.get()) + " FROM runs WHERE 1";
  std::vector<SqlValue> params;
  auto add = [&](const char* cond, SqlValue v) {
    params.push_back(std::move(v));
    sql += std::string(" AND ") + cond + " ?" + std::to_string(params.size());
  };
  if (f.since_ns) add("start_ns >=", *f.since_ns);
  if (f.until_ns) add("start_ns <", *f.until_ns);
  if (f.policy) add("policy_name =", *f.policy);
  if (f.verdict) add("verdict =", std::string(VerdictName(*f.verdict)));
  if (f.uid) add("uid =", int64_t{*f.uid});
  if (f.state) add("state =", *f.state);
  sql += " ORDER BY start_ns DESC, start_seq DESC";
  if (f.limit > 0) sql += " LIMIT " + std::to_string(f.limit);
  SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(impl_->db.get(), sql));
  for (size_t i = 0; i < params.size(); ++i) {
    SAFEX_RETURN_IF_ERROR(s.Bind(static_cast<int>(i + 1), params[i]));
  }
  std::vector<RunSummary> out;
  for (;;) {
    SAFEX_ASSIGN_OR_RETURN(bool have, s.Step());
    if (!have) break;
    auto r = RunSummaryFrom(s);
    if (!r.ok()) {
      s.Reset();
      return r.status().With("run " + s.Text(0));
    }
    out.push_back(std::move(r).value());
  }
  return out;
}

Result<RunDetail> AuditLog::GetRun(std::string_view id) {
  if (!IsValidRunId(id)) {
    return Status::InvalidArgument("not a run id: \"" + std::string(id.substr(0, 64)) + "\"");
  }
  sqlite3* db = impl_->db.get();
  TxnGuard guard(db);
  SAFEX_RETURN_IF_ERROR(Exec(db, "BEGIN", "starting a read"));
  RunDetail detail;
  std::string run_id;
  {
    // Run ids contain no GLOB metacharacters (IsValidRunId), so id* is a plain prefix match.
    SAFEX_ASSIGN_OR_RETURN(
        Stmt s, Stmt::Prepare(db, "SELECT " + RunColumns(db) +
                                      " FROM runs WHERE run_id = ?1 OR run_id GLOB ?1 || '*' "
                                      "ORDER BY run_id = ?1 DESC LIMIT 2"));
    SAFEX_RETURN_IF_ERROR(s.BindText(1, id));
    SAFEX_ASSIGN_OR_RETURN(bool have, s.Step());
    if (!have) return Status::NotFound("no run " + std::string(id) + " in the audit log");
    SAFEX_ASSIGN_OR_RETURN(detail.run, RunSummaryFrom(s));
    SAFEX_ASSIGN_OR_RETURN(bool second, s.Step());
    if (second && detail.run.run_id != id) {
      s.Reset();
      return Status::InvalidArgument("run id prefix " + std::string(id) +
                                     " is ambiguous; give more characters");
    }
    s.Reset();
  }
  {
    SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, SelectEventsSql(db, "WHERE run_id = ?1")));
    SAFEX_RETURN_IF_ERROR(s.BindText(1, detail.run.run_id));
    for (;;) {
      SAFEX_ASSIGN_OR_RETURN(bool have, s.Step());
      if (!have) break;
      auto row = ReadEventRow(s);
      if (!row.ok()) {
        s.Reset();
        return row.status();
      }
      detail.events.push_back(std::move(row).value());
    }
  }
  SAFEX_RETURN_IF_ERROR(Exec(db, "COMMIT", "ending a read"));
  return detail;
}

Status AuditLog::ForEachEvent(const std::function<Status(const EventRow&)>& fn) {
  return ForEachEventAfter(0, 0, fn);
}

Status AuditLog::ForEachEventAfter(int64_t after_seq, uint64_t limit,
                                   const std::function<Status(const EventRow&)>& fn) {
  sqlite3* db = impl_->db.get();
  TxnGuard guard(db);
  SAFEX_RETURN_IF_ERROR(Exec(db, "BEGIN", "starting a read"));
  const std::string sql =
      SelectEventsSql(db, "WHERE seq > ?1") + (limit > 0 ? " LIMIT " + std::to_string(limit) : "");
  SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, sql));
  SAFEX_RETURN_IF_ERROR(s.BindInt(1, after_seq));
  for (;;) {
    SAFEX_ASSIGN_OR_RETURN(bool have, s.Step());
    if (!have) break;
    auto row = ReadEventRow(s);
    Status st = row.ok() ? fn(*row) : row.status();
    if (!st.ok()) {
      s.Reset();
      return st;
    }
  }
  return Exec(db, "COMMIT", "ending a read");
}

Result<uint64_t> AuditLog::EventCount() {
  SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(impl_->db.get(), "SELECT count(*) FROM events"));
  SAFEX_ASSIGN_OR_RETURN(bool have, s.Step());
  uint64_t n = have ? static_cast<uint64_t>(s.Int(0)) : 0;
  s.Reset();
  return n;
}

Result<AuditLog::Durability> AuditLog::GetDurability() {
  Durability d;
  SAFEX_ASSIGN_OR_RETURN(Stmt j, Stmt::Prepare(impl_->db.get(), "PRAGMA journal_mode"));
  SAFEX_ASSIGN_OR_RETURN(bool have, j.Step());
  if (have) d.journal_mode = j.Text(0);
  j.Reset();
  SAFEX_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(impl_->db.get(), "PRAGMA synchronous"));
  SAFEX_ASSIGN_OR_RETURN(have, s.Step());
  if (have) d.synchronous = static_cast<int>(s.Int(0));
  s.Reset();
  return d;
}

Result<std::vector<Checkpoint>> AuditLog::Checkpoints() { return ReadCheckpoints(impl_->db.get()); }

Result<VerifyReport> AuditLog::Verify(const VerifyOptions& options) {
  return FullCheck(impl_->db.get(), log_id_, options);
}

Result<VerifyReport> AuditLog::CheckIntegrity(IntegrityCheck kind,
                                              std::chrono::seconds max_full_age) {
  sqlite3* db = impl_->db.get();
  // The marker is read before the check's snapshot, so every event it names is in the snapshot
  // unless the log lost it.
  const int64_t started_ns = NowNs();
  const std::optional<Marker> marker = ReadMarker(db, log_id_);
  const bool full =
      kind == IntegrityCheck::kFull || !marker || FullCheckIsDue(*marker, started_ns, max_full_age);
  VerifyReport rep;
  if (full) {
    SAFEX_ASSIGN_OR_RETURN(rep, FullCheck(db, log_id_, VerifyOptions{}));
  } else {
    SAFEX_ASSIGN_OR_RETURN(rep, IncrementalCheck(db, log_id_, *marker));
  }
  if (!rep.ok || options_.read_only) return rep;
  if (!full && rep.events == 0) return rep;  // nothing new: no write at all
  // A full check's time is when it started: events appended during it were not all seen.
  SAFEX_ASSIGN_OR_RETURN(std::string changed, StoreMarker(rep.head_seq, rep.head_hash, started_ns,
                                                          full ? started_ns : marker->full_ns));
  if (!changed.empty()) {
    rep.ok = false;
    rep.first_bad_seq = rep.head_seq;
    rep.problem = changed;
  }
  return rep;
}

Result<std::string> AuditLog::StoreMarker(int64_t seq, const std::string& hash, int64_t checked_ns,
                                          int64_t full_ns) {
  Impl& im = *impl_;
  sqlite3* db = im.db.get();
  // Not synced: a marker lost to a crash costs a longer next check, never a wrong answer, while
  // a synced one would cost every run an fsync. The next synced commit (any writer's) carries it
  // to disk with it, and it never names an event that was not already durable.
  SAFEX_RETURN_IF_ERROR(Exec(db, "PRAGMA synchronous=NORMAL", "relaxing sync for the marker"));
  auto write = [&]() -> Result<std::string> {
    TxnGuard guard(db);
    SAFEX_RETURN_IF_ERROR(im.begin_immediate.Step().status());
    // The check ran on a snapshot; under the write lock, the event it ended on must still be
    // the one it verified.
    SAFEX_ASSIGN_OR_RETURN(std::optional<std::string> now_hash, StoredHash(db, log_id_, seq));
    if (now_hash != hash) {
      return "event " + std::to_string(seq) +
             " changed while the log was being checked: it no longer has the hash that was "
             "verified";
    }
    const int64_t now = NowNs();
    Marker next{seq, hash, checked_ns, full_ns};
    if (auto stored = ReadMarker(db, log_id_)) {
      // Several processes check concurrently: the marker only moves forward.
      if (stored->verified_seq > seq) {
        next.verified_seq = stored->verified_seq;
        next.verified_hash = stored->verified_hash;
        next.verified_ns = stored->verified_ns;
      }
      if (stored->full_ns <= now) next.full_ns = std::max(next.full_ns, stored->full_ns);
    }
    SAFEX_ASSIGN_OR_RETURN(
        Stmt ins, Stmt::Prepare(db,
                                "INSERT OR REPLACE INTO integrity_marker (id, log_id, "
                                "verified_seq, verified_hash, verified_ns, full_ns) VALUES "
                                "(1, ?1, ?2, ?3, ?4, ?5)"));
    SAFEX_RETURN_IF_ERROR(ins.BindText(1, log_id_));
    SAFEX_RETURN_IF_ERROR(ins.BindInt(2, next.verified_seq));
    SAFEX_RETURN_IF_ERROR(ins.BindText(3, next.verified_hash));
    SAFEX_RETURN_IF_ERROR(ins.BindInt(4, next.verified_ns));
    SAFEX_RETURN_IF_ERROR(ins.BindInt(5, next.full_ns));
    SAFEX_RETURN_IF_ERROR(ins.Step().status());
    SAFEX_RETURN_IF_ERROR(im.commit.Step().status());
    return std::string();
  };
  Result<std::string> result = write();
  Status restored = Exec(db, "PRAGMA synchronous=FULL", "restoring synchronous=FULL");
  if (!restored.ok()) {
    // Appends on this connection would no longer be durable: refuse them from now on.
    im.durability_lost = true;
    return restored;
  }
  if (!result.ok()) return result.status().With("audit log " + path_ + ": storing the marker");
  return result;
}

Result<Checkpoint> AuditLog::MakeCheckpoint() {
  if (options_.read_only) return Status::FailedPrecondition("audit log opened read-only");
  // A checkpoint vouches for everything before it: never sign a log that does not verify.
  SAFEX_ASSIGN_OR_RETURN(VerifyReport rep, CheckIntegrity(IntegrityCheck::kFull));
  if (!rep.ok) {
    std::string msg =
        "audit log " + path_ + " does not verify; refusing to sign a checkpoint: " + rep.problem;
    if (rep.first_bad_seq > 0)
      msg += " (first bad event: " + std::to_string(rep.first_bad_seq) + ")";
    return Status::DataLoss(msg);
  }
  SAFEX_ASSIGN_OR_RETURN(auto key, SigningKey::LoadOrCreate(options_.key_path, true));
  Impl& im = *impl_;
  sqlite3* db = im.db.get();
  Checkpoint c;
  c.log_id = log_id_;
  c.event_count = static_cast<uint64_t>(rep.head_seq);
  c.head_hash = rep.head_hash;
  c.time_ns = NowNs();
  SAFEX_RETURN_IF_ERROR(key->Sign(&c));
  TxnGuard guard(db);
  SAFEX_RETURN_IF_ERROR(im.begin_immediate.Step().status());
  SAFEX_ASSIGN_OR_RETURN(std::optional<std::string> now_hash,
                         StoredHash(db, log_id_, rep.head_seq));
  if (now_hash != rep.head_hash) {
    return Status::DataLoss("audit log " + path_ + ": event " + std::to_string(rep.head_seq) +
                            " changed after it was verified; refusing to sign a checkpoint");
  }
  SAFEX_ASSIGN_OR_RETURN(Stmt ins, Stmt::Prepare(db,
                                                 "INSERT INTO checkpoints (log_id, event_count, "
                                                 "head_hash, time_ns, public_key, signature) "
                                                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  SAFEX_RETURN_IF_ERROR(ins.BindText(1, c.log_id));
  SAFEX_RETURN_IF_ERROR(ins.BindInt(2, static_cast<int64_t>(c.event_count)));
  SAFEX_RETURN_IF_ERROR(ins.BindText(3, c.head_hash));
  SAFEX_RETURN_IF_ERROR(ins.BindInt(4, c.time_ns));
  SAFEX_RETURN_IF_ERROR(ins.BindText(5, c.public_key));
  SAFEX_RETURN_IF_ERROR(ins.BindText(6, c.signature));
  SAFEX_RETURN_IF_ERROR(ins.Step().status());
  SAFEX_RETURN_IF_ERROR(im.commit.Step().status());
  return c;
}

}  // namespace safex::audit
