// Shipping a node's log to the central database (central.h, docs/audit.md "Fleet").
//
// Order of a ship: ask the central where its copy of this log ends (safex.ship_state); compare
// the node's event there with what the central holds (a node that rewrote shipped history is
// reported, not hidden); send the events after it in batches, each one COPY in one transaction
// (the central's trigger takes only the next sequence number, so a batch is all in or all out);
// then the checkpoints those events cover. A shipper killed at any point leaves the central at
// the end of a committed batch, and the next ship starts from there.
#include <string>

#include "audit/canonical.h"
#include "fleet/central.h"
#include "fleet/central_schema.h"
#include "fleet/pg.h"

namespace safex::fleet {
namespace {

using audit::EventRow;
using internal::PgConn;

// How often a ship re-reads the central's head after another shipper of the same log won a race.
constexpr int kMaxRaces = 3;

struct ShipState {
  std::string host;
  int64_t last_seq = 0;
  std::string last_hash;  // the central's last event's hash; the genesis hash when none
  int64_t last_ordinal = 0;
};

Result<ShipState> ReadShipState(PgConn& db, const std::string& log_id) {
  SAFEX_ASSIGN_OR_RETURN(auto r,
                         db.Exec("SELECT host, last_seq::text, last_hash, last_ordinal::text "
                                 "FROM safex.ship_state($1)",
                                 {log_id}));
  if (r.rows() == 0) {
    return Status::NotFound("log " + log_id +
                            " is not enrolled at the central database (safex audit central enrol)");
  }
  ShipState s;
  s.host = r.Text(0, 0);
  s.last_seq = std::stoll(r.Text(0, 1));
  s.last_hash = r.IsNull(0, 2) ? ToHex(audit::GenesisHash(log_id)) : r.Text(0, 2);
  s.last_ordinal = std::stoll(r.Text(0, 3));
  return s;
}

// The node's stored hash of event `seq`, nullopt when it has none.
Result<std::optional<std::string>> LocalHash(audit::AuditLog& log, int64_t seq) {
  std::optional<std::string> hash;
  SAFEX_RETURN_IF_ERROR(log.ForEachEventAfter(seq - 1, 1, [&](const EventRow& row) {
    if (row.seq() == seq) hash = row.hash;
    return Status::Ok();
  }));
  return hash;
}

// What the node holds where the central's copy ends: "" when it is the same event.
Result<std::string> CompareHead(audit::AuditLog& log, const ShipState& s) {
  if (s.last_seq == 0) return std::string();
  SAFEX_ASSIGN_OR_RETURN(auto local, LocalHash(log, s.last_seq));
  if (!local) {
    return "the node's log has no event " + std::to_string(s.last_seq) +
           ", which the central holds: the node's log was truncated or replaced";
  }
  if (*local != s.last_hash) {
    return "the node's event " + std::to_string(s.last_seq) +
           " is not the one shipped: the node rewrote history it had already shipped";
  }
  return std::string();
}

// One COPY row (text format): log_id, seq, canonical bytes, hash, the projected columns.
void AppendRow(std::string* out, const std::string& log_id, const EventRow& row,
               const std::string& canonical) {
  out->append(log_id);
  out->push_back('\t');
  out->append(std::to_string(row.seq()));
  out->push_back('\t');
  internal::AppendCopyBytea(out, canonical);
  out->push_back('\t');
  internal::AppendCopyText(out, row.hash);
  for (size_t i = audit::kColKind; i < audit::kNumEventColumns; ++i) {
    out->push_back('\t');
    const auto c = static_cast<audit::EventColumn>(i);
    const audit::SqlValue v = internal::ProjectValue(c, row.values[i]);
    if (const auto* n = std::get_if<int64_t>(&v)) {
      out->append(std::to_string(*n));
    } else if (const auto* t = std::get_if<std::string>(&v)) {
      internal::AppendCopyText(out, *t);
    } else {
      out->append("\\N");
    }
  }
  out->push_back('\n');
}

// A batch read from the node: the COPY text, how many events, and the last one's seq and hash.
struct Batch {
  std::string rows;
  uint64_t count = 0;
  int64_t last_seq = 0;
  std::string last_hash;
  // Not empty when the node's log skips sequence numbers after last_seq (events deleted on the
  // node before they were shipped): the central takes no gap, so shipping stops there.
  std::string gap;
};

// Reads up to `limit` events after `after` (whose hash is `prev`), checking each link of the
// node's chain on the way: the first that does not hold goes into *warning (shipped anyway).
Result<Batch> ReadBatch(audit::AuditLog& log, const std::string& log_id, int64_t after,
                        std::string prev, uint64_t limit, std::string* warning) {
  Batch b;
  Status read = log.ForEachEventAfter(after, limit, [&](const EventRow& row) {
    const int64_t expected = (b.count == 0 ? after : b.last_seq) + 1;
    if (row.seq() != expected) {
      b.gap = "the node's log has no event " + std::to_string(expected) +
              " (deleted on the node before it was shipped): shipping stops after event " +
              std::to_string(expected - 1) + "; check the node's log (safex audit verify)";
      return Status::DataLoss(b.gap);
    }
    const std::string canonical = audit::EncodeEvent(row);
    const auto prev_digest = audit::DigestFromHex(prev);
    if (warning->empty() &&
        (!prev_digest || ToHex(audit::ChainHash(*prev_digest, canonical)) != row.hash)) {
      *warning = "the node's event " + std::to_string(row.seq()) +
                 " does not chain onto the event before it (edited, inserted, removed or "
                 "rewritten on the node)";
    }
    AppendRow(&b.rows, log_id, row, canonical);
    prev = row.hash;
    ++b.count;
    b.last_seq = row.seq();
    b.last_hash = row.hash;
    return Status::Ok();
  });
  if (!read.ok() && b.gap.empty()) return read;
  return b;
}

Status SendBatch(PgConn& db, const Batch& b) {
  internal::PgTxn txn(&db);
  SAFEX_RETURN_IF_ERROR(txn.Begin());
  SAFEX_RETURN_IF_ERROR(db.CopyIn("COPY safex.events (log_id, seq, canonical, hash, " +
                                      internal::ProjectedColumnList() + ") FROM STDIN",
                                  b.rows));
  return txn.Commit();
}

// The node's checkpoints after the central's last, as long as the central holds their events
// (up to s.last_seq, where the events just shipped end). No transaction when there are none.
Result<uint64_t> ShipCheckpoints(PgConn& db, audit::AuditLog& log, const ShipState& s) {
  SAFEX_ASSIGN_OR_RETURN(auto cps, log.Checkpoints());
  if (cps.size() <= static_cast<size_t>(s.last_ordinal)) return uint64_t{0};
  internal::PgTxn txn(&db);
  SAFEX_RETURN_IF_ERROR(txn.Begin());
  uint64_t n = 0;
  for (size_t i = static_cast<size_t>(s.last_ordinal); i < cps.size(); ++i) {
    const audit::Checkpoint& c = cps[i];
    if (static_cast<int64_t>(c.event_count) > s.last_seq) break;
    SAFEX_RETURN_IF_ERROR(
        db.Exec("INSERT INTO safex.checkpoints (log_id, ordinal, event_count, head_hash, "
                "time_ns, public_key, signature) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                {log.log_id(), std::to_string(i + 1), std::to_string(c.event_count), c.head_hash,
                 std::to_string(c.time_ns), c.public_key, c.signature})
            .status());
    ++n;
  }
  SAFEX_RETURN_IF_ERROR(txn.Commit());
  return n;
}

// Sends batches until the node has no more (or max_events). A batch another shipper of this log
// got in first is refused by the central: read the new head and go on from there.
Status ShipEvents(PgConn& db, audit::AuditLog& log, const ShipOptions& options, ShipState* s,
                  ShipReport* rep) {
  const uint64_t batch = options.batch_events > 0 ? options.batch_events : 5000;
  int races = 0;
  for (;;) {
    uint64_t limit = batch;
    if (options.max_events > 0) {
      if (rep->events_shipped >= options.max_events) return Status::Ok();
      limit = std::min(limit, options.max_events - rep->events_shipped);
    }
    SAFEX_ASSIGN_OR_RETURN(
        Batch b, ReadBatch(log, log.log_id(), s->last_seq, s->last_hash, limit, &rep->warning));
    if (b.count == 0) return b.gap.empty() ? Status::Ok() : Status::DataLoss(b.gap);
    Status st = SendBatch(db, b);
    if (st.code() == Status::Code::kFailedPrecondition && ++races <= kMaxRaces) {
      SAFEX_ASSIGN_OR_RETURN(*s, ReadShipState(db, log.log_id()));
      continue;
    }
    SAFEX_RETURN_IF_ERROR(st);
    rep->events_shipped += b.count;
    s->last_seq = b.last_seq;
    s->last_hash = b.last_hash;
    if (!b.gap.empty()) return Status::DataLoss(b.gap);
  }
}

}  // namespace

Result<ShipReport> Ship(const std::string& url, audit::AuditLog& log, const ShipOptions& options) {
  SAFEX_ASSIGN_OR_RETURN(auto db, PgConn::Connect(url));
  auto state = ReadShipState(*db, log.log_id());
  if (state.status().code() == Status::Code::kPermissionDenied) {
    return Status::PermissionDenied(
        "role " + db->User() +
        " may not ship (a shipper is a member of safex_shipper): " + state.status().message());
  }
  SAFEX_RETURN_IF_ERROR(state.status());
  ShipState s = std::move(state).value();
  ShipReport rep;
  rep.host = s.host;
  rep.log_id = log.log_id();
  rep.central_seq_before = s.last_seq;
  SAFEX_ASSIGN_OR_RETURN(uint64_t count, log.EventCount());
  rep.local_head_seq = static_cast<int64_t>(count);
  SAFEX_ASSIGN_OR_RETURN(rep.warning, CompareHead(log, s));
  SAFEX_RETURN_IF_ERROR(ShipEvents(*db, log, options, &s, &rep));
  rep.central_seq_after = s.last_seq;
  SAFEX_ASSIGN_OR_RETURN(rep.checkpoints_shipped, ShipCheckpoints(*db, log, s));
  return rep;
}

}  // namespace safex::fleet
