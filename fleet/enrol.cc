// Making the central schema and enrolling node logs (central.h).
#include <re2/re2.h>
#include <sys/stat.h>

#include "audit/checkpoint.h"
#include "fleet/central.h"
#include "fleet/central_schema.h"
#include "fleet/pg.h"

namespace safex::fleet {
namespace {

using internal::PgConn;

// The version of an existing central schema, or 0 when there is none.
Result<int> ExistingSchemaVersion(PgConn& db) {
  SAFEX_ASSIGN_OR_RETURN(auto r, db.Exec("SELECT to_regclass('safex.meta') IS NOT NULL"));
  if (r.Text(0, 0) != "t") return 0;
  SAFEX_ASSIGN_OR_RETURN(auto v,
                         db.Exec("SELECT value FROM safex.meta WHERE key = 'schema_version'"));
  if (v.rows() != 1) return Status::DataLoss("safex.meta has no schema_version");
  return std::atoi(v.Text(0, 0).c_str());
}

Status CheckEnrolment(const Enrolment& e) {
  if (!RE2::FullMatch(e.host, "[A-Za-z0-9][A-Za-z0-9._-]{0,252}")) {
    return Status::InvalidArgument(
        "host name must be 1..253 characters of [A-Za-z0-9._-], "
        "starting with a letter or digit");
  }
  if (!RE2::FullMatch(e.log_id, "[0-9a-f]{32}")) {
    return Status::InvalidArgument("a log id is 32 lowercase hex digits (meta.log_id)");
  }
  if (!RE2::FullMatch(e.public_key, "[0-9a-f]{64}")) {
    return Status::InvalidArgument("a public key is 64 lowercase hex digits (raw Ed25519)");
  }
  if (!e.shipper.empty() && !RE2::FullMatch(e.shipper, "[A-Za-z_][A-Za-z0-9_$-]{0,62}")) {
    return Status::InvalidArgument("the shipper must be a PostgreSQL role name");
  }
  return Status::Ok();
}

// Names what is enrolled already, so that the operator sees which of the two collides.
Status RefuseDuplicate(PgConn& db, const Enrolment& e) {
  SAFEX_ASSIGN_OR_RETURN(auto by_log,
                         db.Exec("SELECT host FROM safex.logs WHERE log_id = $1", {e.log_id}));
  if (by_log.rows() > 0) {
    return Status::FailedPrecondition("log " + e.log_id + " is already enrolled, as host " +
                                      by_log.Text(0, 0) + " (an enrolment is never changed)");
  }
  SAFEX_ASSIGN_OR_RETURN(auto by_host,
                         db.Exec("SELECT log_id FROM safex.logs WHERE host = $1", {e.host}));
  if (by_host.rows() > 0) {
    return Status::FailedPrecondition("host " + e.host + " is already enrolled, with log " +
                                      by_host.Text(0, 0));
  }
  return Status::Ok();
}

}  // namespace

Result<InitReport> InitCentral(const std::string& url) {
  SAFEX_ASSIGN_OR_RETURN(auto db, PgConn::Connect(url));
  SAFEX_ASSIGN_OR_RETURN(int version, ExistingSchemaVersion(*db));
  if (version == internal::kCentralSchemaVersion) return InitReport{false, version};
  if (version != 0) {
    return Status::FailedPrecondition("the central schema is version " + std::to_string(version) +
                                      "; this safex knows version " +
                                      std::to_string(internal::kCentralSchemaVersion));
  }
  // DDL and roles are transactional in PostgreSQL: all of it, or none.
  internal::PgTxn txn(db.get());
  SAFEX_RETURN_IF_ERROR(txn.Begin());
  SAFEX_RETURN_IF_ERROR(db->Run(internal::CreateCentralSql()));
  SAFEX_RETURN_IF_ERROR(txn.Commit());
  return InitReport{true, internal::kCentralSchemaVersion};
}

Result<Enrolment> EnrolmentOf(audit::AuditLog& log, const std::string& key_path,
                              const std::string& host) {
  Enrolment e;
  e.host = host;
  e.log_id = log.log_id();
  // An auditor enrolling from a copy has the public half only; the node itself may not have
  // made its key yet (it is made with the first checkpoint): make it now, as that would.
  struct stat st {};
  if (stat((key_path + ".pub").c_str(), &st) == 0) {
    SAFEX_ASSIGN_OR_RETURN(e.public_key, audit::LoadPublicKeyHex(key_path + ".pub"));
  } else {
    SAFEX_ASSIGN_OR_RETURN(auto key, audit::SigningKey::LoadOrCreate(key_path, true));
    e.public_key = key->public_key_hex();
  }
  return e;
}

Status Enrol(const std::string& url, const Enrolment& e) {
  SAFEX_RETURN_IF_ERROR(CheckEnrolment(e));
  SAFEX_ASSIGN_OR_RETURN(auto db, PgConn::Connect(url));
  SAFEX_RETURN_IF_ERROR(RefuseDuplicate(*db, e));
  if (!e.shipper.empty()) {
    SAFEX_ASSIGN_OR_RETURN(auto role,
                           db->Exec("SELECT 1 FROM pg_roles WHERE rolname = $1", {e.shipper}));
    if (role.rows() == 0) return Status::NotFound("no role " + e.shipper + " in the database");
  }
  std::optional<std::string> shipper;
  if (!e.shipper.empty()) shipper = e.shipper;
  return db
      ->Exec("INSERT INTO safex.logs (log_id, host, public_key, shipper) VALUES ($1, $2, $3, $4)",
             {e.log_id, e.host, e.public_key, shipper})
      .status();
}

}  // namespace safex::fleet
