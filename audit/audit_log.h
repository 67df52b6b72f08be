// The audit log: every run attempt in an append-only SQLite database, hash-chained and
// checkpointed with Ed25519 signatures (docs/audit.md).
//
// Writers (safex run, the daemon) open it read-write; many processes may append at once: each
// append takes SQLite's write lock first (BEGIN IMMEDIATE), reads the head of the chain, inserts
// and commits, so the chain stays linear; concurrent writers wait up to busy_timeout_ms.
// Every connection uses WAL with synchronous=FULL: when Record* returns OK the event is on disk.
// Auditors open it read-only (AuditOptions::read_only) and may query while writers append.
//
// Fail closed: Open refuses a file that is corrupt, foreign (another application's database) or
// of an unknown schema version, and a writer's Open refuses a file it cannot write. The
// supervisor calls CheckWritable() before anything runs and refuses the run (exit 125) on error.
// Open does not read the whole file, so damage inside it is found by CheckIntegrity(), which the
// run paths call before a run too; MakeCheckpoint() never signs a log that does not verify.
//
// Thread-safety: one AuditLog is one SQLite connection; use it from one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "audit/checkpoint.h"
#include "audit/event_row.h"
#include "audit/records.h"
#include "audit/verdict.h"
#include "common/status.h"

namespace safex::audit {

inline constexpr char kDefaultDbPath[] = "/var/lib/safex/audit.db";
inline constexpr char kDefaultKeyPath[] = "/var/lib/safex/audit.key";

struct AuditOptions {
  // Auditors: no write access is needed or used; Record* and MakeCheckpoint fail.
  bool read_only = false;
  // Writers: create the file (mode 0640), its directory (0750, one level) and the schema when
  // missing. When false, a missing file is NotFound.
  bool create = true;
  // The Ed25519 key that signs checkpoints; generated 0600 on first MakeCheckpoint().
  std::string key_path = kDefaultKeyPath;
  // How long a writer waits for another writer's lock before giving up (Unavailable).
  int busy_timeout_ms = 10000;
  // CheckWritable() refuses when the log's filesystem has less free space than this.
  uint64_t min_free_bytes = 1 << 20;
  // Caps the database size (PRAGMA max_page_count); appends beyond fail with
  // ResourceExhausted. 0: no cap beyond the disk's.
  uint64_t max_db_bytes = 0;
};

// The position of an appended event.
struct EventRef {
  int64_t seq = 0;
  std::string hash;  // hex
};

// One run attempt, as the `runs` view shows it.
struct RunSummary {
  std::string run_id;
  std::string state;     // running | finished | interrupted | refused
  std::string verdict;   // a VerdictName(); empty while running
  int64_t start_ns = 0;  // refusals: when refused
  std::optional<int64_t> end_ns;
  Requester requester;
  std::string policy_name;
  std::string policy_source_digest;
  std::string plan_digest;
  std::string backend;
  std::string backend_mode;
  std::vector<std::string> argv;
  std::optional<int64_t> exit_code;
  std::optional<int64_t> signal;
  std::vector<std::string> limits_fired;
  std::optional<int64_t> wall_ns;
  std::optional<int64_t> cpu_ns;
  std::optional<int64_t> peak_memory_bytes;
  std::optional<StreamSummary> stdout_summary;
  std::optional<StreamSummary> stderr_summary;
  std::vector<ValidatorResult> validator_results;
  std::vector<DeniedEgress> denied_egress;
  std::string reason;       // refusal reason, setup error, or why it was interrupted
  std::string purpose;      // RunStart::purpose ("" for ordinary runs)
  std::string enforcement;  // RunEnd::enforcement (JSON; "" when not recorded)
  int64_t start_seq = 0;
  std::optional<int64_t> end_seq;
};

struct RunFilter {
  std::optional<int64_t> since_ns;  // start (or refusal) time >= since
  std::optional<int64_t> until_ns;  // start (or refusal) time < until
  std::optional<std::string> policy;
  std::optional<Verdict> verdict;
  std::optional<uint32_t> uid;
  std::optional<std::string> state;  // running | finished | interrupted | refused
  uint64_t limit = 0;                // 0: all
};

struct RunDetail {
  RunSummary run;
  std::vector<EventRow> events;  // the run's events in log order, with their hashes
};

struct VerifyOptions {
  // A checkpoint kept outside the database (`safex audit checkpoint --out`): the log must still
  // hold exactly that prefix.
  std::optional<Checkpoint> external;
  // When set (hex raw Ed25519 public key), every checkpoint must be signed by this key.
  std::optional<std::string> trusted_public_key;
  bool integrity_check = true;  // run PRAGMA integrity_check first
};

// What AuditLog::CheckIntegrity() examines (docs/audit.md, "Integrity checks").
enum class IntegrityCheck {
  // The chain from the event the last check verified up to the head: O(new events). Edits to
  // events verified before are not seen (the next full check sees them). Becomes kFull when the
  // log has no usable integrity marker or its last full check is older than max_full_age.
  kIncremental,
  // PRAGMA integrity_check, the whole chain, every stored checkpoint and the marker: O(file).
  kFull,
};

// How old the last full check may be before CheckIntegrity(kIncremental) does a full one.
inline constexpr std::chrono::seconds kDefaultMaxFullCheckAge = std::chrono::hours(24);

struct VerifyReport {
  bool ok = false;
  IntegrityCheck kind = IntegrityCheck::kFull;  // what was checked (Verify: always kFull)
  uint64_t events = 0;       // events whose chain was checked (kIncremental: the new ones)
  int64_t head_seq = 0;      // seq of the last event (0 when empty)
  std::string head_hash;     // hash of the last event (the genesis hash when empty)
  uint64_t checkpoints = 0;  // checkpoints whose signature and prefix were checked
  // When !ok: the first bad event's seq (0 when the problem is not one event) and what is wrong.
  int64_t first_bad_seq = 0;
  std::string problem;
};

class AuditLog {
 public:
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Opens (and for writers, creates) the log at `path`; ":memory:" gives a private in-memory log
  // for tests. Errors: NotFound (no file, !create or read_only), PermissionDenied (cannot write),
  // DataLoss (not an SQLite database / corrupt), FailedPrecondition (foreign database or an
  // unknown schema version), Unavailable (I/O error, locked past the timeout).
  static Result<std::unique_ptr<AuditLog>> Open(const std::string& path,
                                                const AuditOptions& options = {});

  // Cheap proof that an append would be accepted now: takes and releases the write lock, checks
  // that the file is still the one opened and that the filesystem has min_free_bytes free.
  Status CheckWritable();

  // Each appends one event and commits it durably before returning OK.
  // RecordStart: run_id must be new; a purpose that names a session must keep the session's rules
  // (RecordSession). RecordEnd/RecordInterrupted: run_id must have a start and no end yet
  // (FailedPrecondition otherwise). RecordRefusal: reason required; run_id may be
  // empty (a fresh one is made).
  Status RecordStart(const RunStart& start, EventRef* appended = nullptr);
  Status RecordEnd(const RunEnd& end, EventRef* appended = nullptr);
  Status RecordRefusal(const Refusal& refusal, EventRef* appended = nullptr);
  Status RecordInterrupted(const Interrupted& interrupted, EventRef* appended = nullptr);
  // FailedPrecondition when the log has no event of that run.
  Status RecordAccess(const Access& access, EventRef* appended = nullptr);
  // A pooled sandbox made (its id new to the log) or evicted (made before, not yet evicted).
  Status RecordSandbox(const SandboxEvent& event, EventRef* appended = nullptr);

  // Pooled sandboxes made and never ended: no eviction, and no run's end names them. Crash
  // recovery records the eviction of those whose maker is gone (the service was killed).
  struct UnendedSandbox {
    std::string sandbox_id;
    std::optional<int32_t> maker_pid;  // the service process that made it
    int64_t made_ns = 0;
    std::string policy_name;
    std::string plan_digest;
  };
  Result<std::vector<UnendedSandbox>> UnendedSandboxes();

  // An agent session's event (records.h). Opened: the id is new to the log (no event of any
  // kind has it). File in / file out: the session is open and the requester's uid is its
  // opener's. Closed: the session is open (by anyone: the caller, or the service). Each is
  // FailedPrecondition otherwise. A run names its session with RunStart::purpose =
  // SessionExecPurpose(id, N); RecordStart then requires the session open, the start's uid its
  // opener's, and N one more than the session's exec runs so far (FailedPrecondition).
  Status RecordSession(const SessionEvent& event, EventRef* appended = nullptr);

  // Sessions opened and never closed, oldest first: what crash recovery and drain close (with a
  // reason "interrupted: ...").
  struct OpenSession {
    std::string session_id;
    std::optional<uint32_t> opener_uid;  // the caller it serves
    std::optional<int32_t> opener_pid;   // the caller's process when it was opened
    int64_t opened_ns = 0;
    std::string policy_name;
    std::string plan_digest;
  };
  Result<std::vector<OpenSession>> OpenSessions();

  // Sessions, newest first (the `sessions` view): what `safex audit sessions` lists. A log of a
  // schema before sessions (version 4 or older, opened read-only) has none.
  struct SessionSummary {
    std::string session_id;
    int64_t opened_ns = 0;
    std::optional<uint32_t> uid;  // the caller it served
    std::string policy_name;
    std::string plan_digest;
    std::string backend;
    std::optional<int64_t> closed_ns;  // nullopt: still open (or its service was killed)
    std::string closed_because;
    uint64_t execs = 0;
    uint64_t files_in = 0;
    uint64_t files_out = 0;
  };
  Result<std::vector<SessionSummary>> ListSessions(uint64_t limit);

  // Runs that started and have no end: what crash recovery closes with RecordInterrupted.
  Result<std::vector<std::string>> UnfinishedRuns();
  // The same with each run's start time (unix ns), oldest first.
  Result<std::vector<std::pair<std::string, int64_t>>> UnfinishedRunStarts();

  // Newest first (by start time, then log order).
  Result<std::vector<RunSummary>> ListRuns(const RunFilter& filter);
  // An exact run id, or a unique prefix of one (NotFound / InvalidArgument when ambiguous).
  Result<RunDetail> GetRun(std::string_view run_id_or_prefix);
  // Every event in log order; stops at the first error `fn` returns.
  Status ForEachEvent(const std::function<Status(const EventRow&)>& fn);
  // The events with seq > after_seq in log order, at most `limit` of them (0: all), read in one
  // read transaction: what `safex audit ship` sends next.
  Status ForEachEventAfter(int64_t after_seq, uint64_t limit,
                           const std::function<Status(const EventRow&)>& fn);
  Result<uint64_t> EventCount();

  // Recomputes the whole chain and checks every stored checkpoint (and options.external), and
  // that the event the integrity marker names still has the hash the marker recorded.
  // A damaged log is a report with ok == false; an error Status means the log could not be read.
  Result<VerifyReport> Verify(const VerifyOptions& options = {});

  // The check a run makes before it starts; refuse the run unless the result is OK and ok.
  // kFull is Verify() with default options. kIncremental starts from the integrity marker (a row
  // outside the hash chain: "verified through seq N, hash H, at T; last full check at T2") and
  // checks that event N still has hash H and the chain from N+1 to the head; it does a full
  // check instead when the marker is missing, unreadable, malformed or of another log, or when
  // T2 is older than max_full_age (or in the future). A marker whose event N does not exist or
  // has another hash fails the check (the log was truncated or rewritten, or the marker edited).
  // On success a writer moves the marker forward (never back; its commit is not synced, so it
  // costs no fsync: losing it to a crash only means a longer next check); read-only logs are
  // checked but not marked.
  // REQUIRES: not inside another operation on this AuditLog (one thread at a time).
  Result<VerifyReport> CheckIntegrity(IntegrityCheck kind,
                                      std::chrono::seconds max_full_age = kDefaultMaxFullCheckAge);

  // Verifies the whole log first (CheckIntegrity(kFull)); refuses with DataLoss, naming the
  // problem and the first bad event, when it does not verify. Otherwise signs (event count,
  // head hash, now) of what was verified with the key at options.key_path (created on first
  // use) and appends it to the checkpoints table. Events appended while the check ran are
  // covered by the next checkpoint.
  Result<Checkpoint> MakeCheckpoint();
  Result<std::vector<Checkpoint>> Checkpoints();

  // This connection's durability settings: journal_mode "wal" and synchronous 2 (FULL) for a
  // file log.
  struct Durability {
    std::string journal_mode;
    int synchronous = 0;
  };
  Result<Durability> GetDurability();

  const std::string& path() const { return path_; }
  const std::string& log_id() const { return log_id_; }

 private:
  AuditLog() = default;
  Status Init();
  Status CreateSchemaIfNew();
  Status MigrateToCurrentSchema(int64_t opened_version);
  Status Append(EventRow row, EventRef* appended);
  // Moves the integrity marker to (seq, hash); "" when done, else why the log changed under the
  // check (the event no longer has the verified hash).
  Result<std::string> StoreMarker(int64_t seq, const std::string& hash, int64_t checked_ns,
                                  int64_t full_ns);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  AuditOptions options_;
  std::string log_id_;
};

// A fresh run id: a UUIDv7 (time-ordered, 74 random bits), e.g.
// "019381c2-5b7e-7c1a-9f3e-0d2b6a4c8e11".
std::string NewRunId();

}  // namespace safex::audit
