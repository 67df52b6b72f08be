// Verifying the central copy of every node's log (central.h, docs/audit.md "Fleet").
//
// For each enrolled log, in one consistent snapshot: every event in seq order must follow the
// one before (a gap is a deletion), its canonical bytes must decode to an event of that seq (else
// reordered or replaced), hash onto the previous event's hash to exactly the stored hash (else
// edited, inserted, removed before it, or rewritten on the node), and its projected columns must
// be what the bytes say (else edited for the views). Then every checkpoint: the next ordinal,
// signed by the key pinned at enrolment, covering events the central holds, with the chain's
// hash at its event count. The first problem of a log is its report; other logs go on.
#include <map>
#include <string>

#include "audit/canonical.h"
#include "audit/checkpoint.h"
#include "fleet/central.h"
#include "fleet/central_schema.h"
#include "fleet/pg.h"

namespace safex::fleet {
namespace {

using audit::EventColumn;
using internal::PgConn;
using internal::PgResult;

constexpr int kPageRows = 10000;

struct CentralLog {
  std::string log_id;
  std::string host;
  std::string public_key;
};

Result<std::vector<CentralLog>> ReadLogs(PgConn& db, const std::optional<std::string>& host) {
  SAFEX_ASSIGN_OR_RETURN(auto r, db.Exec("SELECT log_id, host, public_key FROM safex.logs "
                                         "WHERE $1::text IS NULL OR host = $1 ORDER BY host",
                                         {host}));
  if (host && r.rows() == 0) return Status::NotFound("no host " + *host + " is enrolled");
  std::vector<CentralLog> logs;
  for (int i = 0; i < r.rows(); ++i) logs.push_back({r.Text(i, 0), r.Text(i, 1), r.Text(i, 2)});
  return logs;
}

// A stored projected value, read in binary format.
audit::SqlValue StoredValue(const PgResult& r, int row, int col, EventColumn c) {
  if (r.IsNull(row, col)) return std::monostate();
  if (internal::IsIntegerColumn(c)) return r.Int8(row, col);
  return std::string(r.Bytes(row, col));
}

// The chain walk over one log: where it is, and what it has seen.
struct Walk {
  const CentralLog* log = nullptr;
  int64_t expected = 1;
  Sha256Digest prev{};
  // The event counts the log's checkpoints name -> the chain hash there, filled by the walk:
  // only those, not every event's (a log of millions of events).
  std::map<int64_t, std::string> hash_at;
  CentralLogReport* rep = nullptr;

  bool Fail(int64_t seq, std::string problem) {
    rep->ok = false;
    rep->first_bad_seq = seq;
    rep->problem = std::move(problem);
    return false;
  }
};

// Row `i` of a page: true when it holds, else false with the walk's report saying what is wrong
// (the walk stops there).
bool CheckEvent(const PgResult& r, int i, Walk* w) {
  const int64_t seq = r.Int8(i, 0);
  const std::string at = "event " + std::to_string(seq);
  if (seq != w->expected) {
    return w->Fail(w->expected, "events " + std::to_string(w->expected) + ".." +
                                    std::to_string(seq - 1) + " are missing (deleted)");
  }
  const std::string_view canonical = r.Bytes(i, 1);
  auto row = audit::DecodeEvent(canonical);
  if (!row.ok())
    return w->Fail(seq, at + ": its bytes are not an event: " + row.status().message());
  if (row->seq() != seq) {
    return w->Fail(seq, at + ": its bytes are event " + std::to_string(row->seq()) +
                            "'s (reordered or replaced)");
  }
  const Sha256Digest h = audit::ChainHash(w->prev, canonical);
  const std::string hex = ToHex(h);
  if (hex != r.Bytes(i, 2)) {
    return w->Fail(seq,
                   at + " (run " + std::string(row->text(audit::kColRunId)) +
                       "): hash mismatch: this event was edited, or one before it was removed, "
                       "inserted or reordered, or the node rewrote its history");
  }
  const auto names = audit::EventColumnNames();
  for (size_t c = audit::kColKind; c < audit::kNumEventColumns; ++c) {
    const auto col = static_cast<EventColumn>(c);
    const int field = static_cast<int>(c - audit::kColKind) + 3;
    if (StoredValue(r, i, field, col) != internal::ProjectValue(col, row->values[c])) {
      return w->Fail(seq, at + ": column " + std::string(names[c]) +
                              " does not match the event's bytes (edited)");
    }
  }
  w->prev = h;
  if (auto wanted = w->hash_at.find(seq); wanted != w->hash_at.end()) wanted->second = hex;
  ++w->expected;
  return true;
}

// The log's last seq at the central (0: none).
Result<int64_t> CentralHead(PgConn& db, const std::string& log_id) {
  SAFEX_ASSIGN_OR_RETURN(
      auto r,
      db.Exec("SELECT coalesce(max(seq), 0)::text FROM safex.events WHERE log_id = $1", {log_id}));
  return std::stoll(r.Text(0, 0));
}

// Every event of the log up to its head, a page at a time. Each page is a bounded range of
// sequence numbers, so that whatever plan the server picks (a table without statistics yet,
// after a bulk ship, got a sort of every remaining event per page: quadratic), a page costs what
// it holds; an empty range (deleted events) is found by the next event after it. true: the
// chain holds.
Result<bool> WalkEvents(PgConn& db, Walk* w) {
  const std::string sql = "SELECT seq, canonical, hash, " + internal::ProjectedColumnList() +
                          " FROM safex.events WHERE log_id = $1 AND seq > $2 AND seq <= $3 "
                          "ORDER BY seq";
  SAFEX_ASSIGN_OR_RETURN(const int64_t head, CentralHead(db, w->log->log_id));
  for (int64_t from = 0; from < head; from += kPageRows) {
    SAFEX_ASSIGN_OR_RETURN(
        auto page,
        db.Exec(sql, {w->log->log_id, std::to_string(from), std::to_string(from + kPageRows)},
                true));
    for (int i = 0; i < page.rows(); ++i) {
      if (!CheckEvent(page, i, w)) return false;
      ++w->rep->events;
    }
  }
  return true;
}

audit::Checkpoint CheckpointFrom(const PgResult& r, int i) {
  audit::Checkpoint c;
  c.log_id = r.Text(i, 1);
  c.event_count = std::stoull(r.Text(i, 2));
  c.head_hash = r.Text(i, 3);
  c.time_ns = std::stoll(r.Text(i, 4));
  c.public_key = r.Text(i, 5);
  c.signature = r.Text(i, 6);
  return c;
}

// One checkpoint against the chain the walk saw: "" when it holds.
std::string CheckpointProblem(const audit::Checkpoint& c, int64_t ordinal, int64_t expected,
                              const Walk& w) {
  const std::string at = "checkpoint " + std::to_string(ordinal);
  if (ordinal != expected)
    return "checkpoint " + std::to_string(expected) + " is missing (deleted)";
  if (c.public_key != w.log->public_key)
    return at + " is not signed by the key pinned at enrolment";
  if (!audit::VerifyCheckpointSignature(c).ok()) return at + ": its signature does not verify";
  const auto count = static_cast<int64_t>(c.event_count);
  if (count > w.expected - 1) {
    return at + " covers " + std::to_string(count) + " events; the central holds " +
           std::to_string(w.expected - 1) + ": the events after those were deleted";
  }
  const std::string head =
      count == 0 ? ToHex(audit::GenesisHash(w.log->log_id)) : w.hash_at.at(count);
  if (c.head_hash != head)
    return at + " does not match the chain at event " + std::to_string(count);
  return "";
}

// The log's checkpoints, in ordinal order (read before the walk: it keeps the chain hashes they
// name).
Result<PgResult> ReadCheckpoints(PgConn& db, const std::string& log_id) {
  return db.Exec(
      "SELECT ordinal::text, log_id, event_count::text, head_hash, time_ns::text, public_key, "
      "signature FROM safex.checkpoints WHERE log_id = $1 ORDER BY ordinal",
      {log_id});
}

bool CheckCheckpoints(const PgResult& r, Walk* w) {
  for (int i = 0; i < r.rows(); ++i) {
    const audit::Checkpoint c = CheckpointFrom(r, i);
    const std::string problem = CheckpointProblem(c, std::stoll(r.Text(i, 0)), i + 1, *w);
    if (!problem.empty()) {
      return w->Fail(static_cast<int64_t>(c.event_count), problem);
    }
    ++w->rep->checkpoints;
  }
  return true;
}

Result<CentralLogReport> VerifyLog(PgConn& db, const CentralLog& log) {
  CentralLogReport rep;
  rep.host = log.host;
  rep.log_id = log.log_id;
  rep.ok = true;
  Walk w;
  w.log = &log;
  w.prev = audit::GenesisHash(log.log_id);
  w.rep = &rep;
  // One snapshot: shippers appending meanwhile neither add to nor cut what is checked.
  internal::PgTxn txn(&db);
  SAFEX_RETURN_IF_ERROR(db.Run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  // Each page is a range of the primary key: never a scan of the whole table per page.
  SAFEX_RETURN_IF_ERROR(db.Run("SET LOCAL enable_seqscan = off"));
  SAFEX_ASSIGN_OR_RETURN(PgResult checkpoints, ReadCheckpoints(db, log.log_id));
  for (int i = 0; i < checkpoints.rows(); ++i) {
    w.hash_at[std::stoll(checkpoints.Text(i, 2))] = "";
  }
  SAFEX_ASSIGN_OR_RETURN(bool chain_ok, WalkEvents(db, &w));
  rep.head_seq = w.expected - 1;
  if (chain_ok) CheckCheckpoints(checkpoints, &w);
  return rep;
}

}  // namespace

Result<std::vector<CentralLogReport>> VerifyCentral(const std::string& url,
                                                    const std::optional<std::string>& host) {
  SAFEX_ASSIGN_OR_RETURN(auto db, PgConn::Connect(url));
  SAFEX_ASSIGN_OR_RETURN(auto logs, ReadLogs(*db, host));
  std::vector<CentralLogReport> reports;
  for (const CentralLog& log : logs) {
    SAFEX_ASSIGN_OR_RETURN(auto rep, VerifyLog(*db, log));
    reports.push_back(std::move(rep));
  }
  return reports;
}

}  // namespace safex::fleet
