#include "fleet/pg.h"

#include <endian.h>

#include <algorithm>
#include <cstring>

#include "fleet/libpq.h"

namespace safex::fleet::internal {
namespace {

// libpq's messages end with a newline; ours are one line.
std::string Trimmed(const char* m) {
  std::string s = m != nullptr ? m : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

// A connection that failed: a refused login is the operator's to fix (PermissionDenied); a
// server that is not there may come back (Unavailable).
Status ConnectStatus(pg_conn* c) {
  const std::string m = Trimmed(Pq().PQerrorMessage(c));
  const std::string text = "cannot connect to the central audit database: " + m;
  for (const char* denied : {"authentication failed", "does not exist", "pg_hba.conf",
                             "permission denied", "no password supplied"}) {
    if (m.find(denied) != std::string::npos) return Status::PermissionDenied(text);
  }
  return Status::Unavailable(text);
}

Status StatusForSqlState(const std::string& state, std::string message) {
  auto is = [&](const char* prefix) { return state.rfind(prefix, 0) == 0; };
  if (is("28") || state == "42501") return Status::PermissionDenied(std::move(message));
  if (is("23") || state == "P0001") return Status::FailedPrecondition(std::move(message));
  if (state == "42P01" || state == "3F000") {
    return Status::FailedPrecondition(message +
                                      " (is the central schema made? safex audit central init)");
  }
  if (is("08") || is("57P")) return Status::Unavailable(std::move(message));
  if (is("53")) return Status::ResourceExhausted(std::move(message));
  if (state == "3D000") return Status::NotFound(std::move(message));
  return Status::Internal(message + " (SQLSTATE " + state + ")");
}

}  // namespace

PgResult::~PgResult() { Pq().PQclear(r_); }
int PgResult::rows() const { return Pq().PQntuples(r_); }
bool PgResult::IsNull(int row, int col) const { return Pq().PQgetisnull(r_, row, col) != 0; }
std::string_view PgResult::Bytes(int row, int col) const {
  return {Pq().PQgetvalue(r_, row, col), static_cast<size_t>(Pq().PQgetlength(r_, row, col))};
}
int64_t PgResult::Int8(int row, int col) const {
  uint64_t be = 0;
  if (Pq().PQgetlength(r_, row, col) == 8) std::memcpy(&be, Pq().PQgetvalue(r_, row, col), 8);
  return static_cast<int64_t>(be64toh(be));
}

PgConn::~PgConn() { Pq().PQfinish(conn_); }

Result<std::unique_ptr<PgConn>> PgConn::Connect(const std::string& url) {
  SAFEX_RETURN_IF_ERROR(LoadLibpq());
  char* err = nullptr;
  PQconninfoOption* parsed = Pq().PQconninfoParse(url.c_str(), &err);
  if (parsed == nullptr) {
    Status st = Status::InvalidArgument("the central database's address does not parse: " +
                                        Trimmed(err != nullptr ? err : "out of memory"));
    Pq().PQfreemem(err);
    return st;
  }
  Pq().PQconninfoFree(parsed);
  // Defaults first: what the address itself says overrides them (expand_dbname).
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"10", "safex", url.c_str(), nullptr};
  std::unique_ptr<PgConn> c(new PgConn());
  c->conn_ = Pq().PQconnectdbParams(keys, values, 1);
  if (c->conn_ == nullptr) return Status::ResourceExhausted("libpq: out of memory");
  if (Pq().PQstatus(c->conn_) != CONNECTION_OK) return ConnectStatus(c->conn_);
  // The server's NOTICEs are not ours to print (libpq writes them to stderr by default).
  Pq().PQsetNoticeProcessor(
      c->conn_, [](void*, const char*) {}, nullptr);
  return c;
}

Status PgConn::ResultStatus(pg_result* r, std::string_view what) {
  const ExecStatusType s = Pq().PQresultStatus(r);
  if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK || s == PGRES_COPY_IN) return Status::Ok();
  if (Pq().PQstatus(conn_) != CONNECTION_OK) {
    return Status::Unavailable(std::string(what) +
                               ": lost the connection: " + Trimmed(Pq().PQerrorMessage(conn_)));
  }
  const char* state = Pq().PQresultErrorField(r, PG_DIAG_SQLSTATE);
  std::string message =
      std::string(what) + ": " + Trimmed(Pq().PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY));
  if (const char* detail = Pq().PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL)) {
    message += " (" + Trimmed(detail) + ")";
  }
  return StatusForSqlState(state != nullptr ? state : "", std::move(message));
}

Result<PgResult> PgConn::Exec(std::string_view sql,
                              const std::vector<std::optional<std::string>>& params,
                              bool binary_results) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  const std::string text(sql);
  pg_result* raw = Pq().PQexecParams(conn_, text.c_str(), static_cast<int>(values.size()), nullptr,
                                     values.data(), nullptr, nullptr, binary_results ? 1 : 0);
  if (raw == nullptr) return Status::Unavailable("libpq: " + Trimmed(Pq().PQerrorMessage(conn_)));
  PgResult r(raw);
  SAFEX_RETURN_IF_ERROR(ResultStatus(raw, "the central audit database"));
  return r;
}

Status PgConn::Run(std::string_view sql) {
  const std::string text(sql);
  pg_result* raw = Pq().PQexec(conn_, text.c_str());
  if (raw == nullptr) return Status::Unavailable("libpq: " + Trimmed(Pq().PQerrorMessage(conn_)));
  PgResult owner(raw);
  return ResultStatus(raw, "the central audit database");
}

// COPY: start it, send the rows in pieces, end it, and read the statement's own result (where a
// trigger's refusal of a row shows).
Status PgConn::CopyIn(std::string_view copy_sql, std::string_view data) {
  const std::string text(copy_sql);
  pg_result* start = Pq().PQexec(conn_, text.c_str());
  if (start == nullptr) return Status::Unavailable("libpq: " + Trimmed(Pq().PQerrorMessage(conn_)));
  {
    PgResult owner(start);
    SAFEX_RETURN_IF_ERROR(ResultStatus(start, "starting COPY"));
  }
  constexpr size_t kPiece = 1 << 20;
  for (size_t off = 0; off < data.size(); off += kPiece) {
    const size_t n = std::min(kPiece, data.size() - off);
    if (Pq().PQputCopyData(conn_, data.data() + off, static_cast<int>(n)) != 1) {
      return Status::Unavailable("sending rows: " + Trimmed(Pq().PQerrorMessage(conn_)));
    }
  }
  if (Pq().PQputCopyEnd(conn_, nullptr) != 1) {
    return Status::Unavailable("ending COPY: " + Trimmed(Pq().PQerrorMessage(conn_)));
  }
  Status st;
  while (pg_result* r = Pq().PQgetResult(conn_)) {
    PgResult owner(r);
    if (st.ok()) st = ResultStatus(r, "the central audit database");
  }
  return st;
}

std::string PgConn::User() const { return Pq().PQuser(conn_) != nullptr ? Pq().PQuser(conn_) : ""; }

PgTxn::~PgTxn() {
  if (open_) (void)c_->Run("ROLLBACK");
}

Status PgTxn::Commit() {
  open_ = false;
  return c_->Run("COMMIT");
}

void AppendCopyText(std::string* out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      default:
        out->push_back(c);
    }
  }
}

void AppendCopyBytea(std::string* out, std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->append("\\\\x");
  for (unsigned char b : bytes) {
    out->push_back(kHex[b >> 4]);
    out->push_back(kHex[b & 15]);
  }
}

}  // namespace safex::fleet::internal
