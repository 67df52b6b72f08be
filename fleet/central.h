// The fleet audit: every host's audit log shipped into one PostgreSQL database and verified
// there (docs/audit.md, "Fleet").
//
// Each host keeps its own tamper-evident SQLite log (audit/). `Ship` sends what the central copy
// lacks: the events after the central's last sequence number, each with the canonical bytes the
// node hashed and the node's chain hash, then the signed checkpoints those events cover. Every
// batch is one transaction and the central refuses any event that is not the next one of its
// log, so a retry or a killed shipper never duplicates or loses an event. `VerifyCentral`
// recomputes each log's chain from the stored bytes and checks each checkpoint against the key
// pinned when the log was enrolled; it names the host and the first bad sequence number.
//
// The central database is named by a libpq connection string or URI ("postgresql://..." or
// "host=/run/postgresql dbname=audit"); credentials come from it, PGPASSFILE/.pgpass or the
// server's peer authentication. Errors never repeat the string (it may hold a password).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "common/status.h"

namespace safex::fleet {

struct InitReport {
  bool created = false;  // false: the schema was already there (nothing changed)
  int schema_version = 0;
};
// Makes the central schema, roles and views in one transaction (nothing half-made on error).
// Run as the database's owner; an existing schema of this version is left as it is.
Result<InitReport> InitCentral(const std::string& url);

struct Enrolment {
  std::string host;        // the name auditors see: [A-Za-z0-9][A-Za-z0-9._-]{0,252}
  std::string log_id;      // the node log's meta.log_id (32 hex digits)
  std::string public_key;  // its checkpoint key, 64 hex digits (pinned from now on)
  std::string shipper;     // the role that may ship it; "" = any member of safex_shipper
};
// The node side of an enrolment: the log's id and the public half of `key_path` (KEY.pub; the
// key pair is made when missing, as the first checkpoint would).
Result<Enrolment> EnrolmentOf(audit::AuditLog& log, const std::string& key_path,
                              const std::string& host);
// Records the log at the central. FailedPrecondition when the log or the host name is enrolled
// already (an enrolment is never changed: the pinned key is what checkpoints are held to).
Status Enrol(const std::string& url, const Enrolment& e);

struct ShipOptions {
  uint64_t batch_events = 5000;  // events per transaction
  uint64_t max_events = 0;       // stop after this many (0: everything there is)
};

struct ShipReport {
  std::string host;  // as enrolled
  std::string log_id;
  int64_t central_seq_before = 0;
  int64_t central_seq_after = 0;
  int64_t local_head_seq = 0;  // the node's last event when shipping began
  uint64_t events_shipped = 0;
  uint64_t checkpoints_shipped = 0;
  // Not empty when the node's log is not what the central holds or does not verify where it
  // was read (history rewritten after it was shipped, an event edited before shipping). The
  // events were shipped as they are: verify --central names where.
  std::string warning;
  int64_t lag() const { return local_head_seq - central_seq_after; }
};
// Ships the node log's unshipped events and checkpoints. NotFound when the log is not enrolled.
Result<ShipReport> Ship(const std::string& url, audit::AuditLog& log, const ShipOptions& options);

struct CentralLogReport {
  std::string host;
  std::string log_id;
  bool ok = false;
  uint64_t events = 0;       // events checked
  uint64_t checkpoints = 0;  // checkpoints checked
  int64_t head_seq = 0;
  int64_t first_bad_seq = 0;  // when !ok: the first bad event (0: not one event)
  std::string problem;
};
// Every enrolled log (or only `host`'s), by host name. NotFound for an unknown host.
Result<std::vector<CentralLogReport>> VerifyCentral(const std::string& url,
                                                    const std::optional<std::string>& host);

}  // namespace safex::fleet
