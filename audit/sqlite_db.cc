#include "audit/sqlite_db.h"

namespace safex::audit::internal {

Status SqliteStatus(sqlite3* db, int rc, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += sqlite3_errstr(rc);
  if (db != nullptr) {
    const char* detail = sqlite3_errmsg(db);
    if (detail != nullptr && std::string_view(detail) != sqlite3_errstr(rc)) {
      msg += " (";
      msg += detail;
      msg += ")";
    }
    const char* file = sqlite3_db_filename(db, "main");
    if (file != nullptr && *file != '\0') {
      msg += " [";
      msg += file;
      msg += "]";
    }
  }
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return Status::ResourceExhausted(msg + ": the audit log's disk or size cap is full");
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return Status::PermissionDenied(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::DataLoss(msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_PROTOCOL:
      return Status::Unavailable(msg);
    case SQLITE_CONSTRAINT:
      return Status::FailedPrecondition(msg);
    default:
      return Status::Internal(msg);
  }
}

Status Exec(sqlite3* db, const char* sql, std::string_view what) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  sqlite3_free(err);  // the connection's errmsg carries the same text
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, what);
  return Status::Ok();
}

Result<Stmt> Stmt::Prepare(sqlite3* db, std::string_view sql) {
  Stmt s;
  s.db_ = db;
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &s.stmt_, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "preparing a query");
  return s;
}

Status Stmt::Bind(int i, const SqlValue& v) {
  int rc;
  if (std::holds_alternative<std::monostate>(v)) {
    rc = sqlite3_bind_null(stmt_, i);
  } else if (const auto* n = std::get_if<int64_t>(&v)) {
    rc = sqlite3_bind_int64(stmt_, i, *n);
  } else {
    const auto& s = std::get<std::string>(v);
    rc = sqlite3_bind_text64(stmt_, i, s.data(), s.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  }
  if (rc != SQLITE_OK) return SqliteStatus(db_, rc, "binding a value");
  return Status::Ok();
}

Result<bool> Stmt::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  Status st = rc == SQLITE_DONE ? Status::Ok() : SqliteStatus(db_, rc, "sqlite3_step");
  Reset();
  if (!st.ok()) return st;
  return false;
}

void Stmt::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Stmt::Text(int i) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
  int n = sqlite3_column_bytes(stmt_, i);
  return p == nullptr ? std::string() : std::string(p, static_cast<size_t>(n));
}

Result<SqlValue> Stmt::Value(int i) const {
  switch (sqlite3_column_type(stmt_, i)) {
    case SQLITE_NULL:
      return SqlValue(std::monostate{});
    case SQLITE_INTEGER:
      return SqlValue(Int(i));
    case SQLITE_TEXT:
      return SqlValue(Text(i));
    default:
      return Status::InvalidArgument(std::string("column ") + std::string(ColumnName(i)) +
                                     " holds a REAL or BLOB, which safex never writes");
  }
}

}  // namespace safex::audit::internal
