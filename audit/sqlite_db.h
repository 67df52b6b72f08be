// Thin RAII over the SQLite C API for the audit library (internal: not for other libraries).
// Every failure becomes a Status that names the operation, the database file and SQLite's message,
// with a code an operator can act on (full disk, read-only, corrupt, busy).
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>
#include <string_view>

#include "audit/event_row.h"
#include "common/status.h"

namespace safex::audit::internal {

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;

// Maps an SQLite result code to a Status: SQLITE_FULL -> ResourceExhausted, READONLY/PERM/AUTH ->
// PermissionDenied, CORRUPT/NOTADB -> DataLoss, BUSY/LOCKED -> Unavailable, CANTOPEN/IOERR ->
// Unavailable, CONSTRAINT -> FailedPrecondition, others -> Internal.
Status SqliteStatus(sqlite3* db, int rc, std::string_view what);

// Runs SQL that returns no rows we need.
Status Exec(sqlite3* db, const char* sql, std::string_view what);

// A prepared statement, reset after each use. Move-only.
class Stmt {
 public:
  Stmt() = default;
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt(Stmt&& o) noexcept : db_(o.db_), stmt_(std::exchange(o.stmt_, nullptr)) {}
  Stmt& operator=(Stmt&& o) noexcept {
    if (this != &o) {
      sqlite3_finalize(stmt_);
      db_ = o.db_;
      stmt_ = std::exchange(o.stmt_, nullptr);
    }
    return *this;
  }

  static Result<Stmt> Prepare(sqlite3* db, std::string_view sql);

  // Parameters are 1-based, as in SQLite.
  Status Bind(int i, const SqlValue& v);
  Status BindInt(int i, int64_t v) { return Bind(i, SqlValue(v)); }
  Status BindText(int i, std::string_view v) { return Bind(i, SqlValue(std::string(v))); }
  // true: a row is ready; false: done. The statement resets itself when done or failed.
  Result<bool> Step();
  void Reset();

  int ColumnCount() const { return sqlite3_column_count(stmt_); }
  std::string_view ColumnName(int i) const { return sqlite3_column_name(stmt_, i); }
  bool IsNull(int i) const { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }
  int64_t Int(int i) const { return sqlite3_column_int64(stmt_, i); }
  std::string Text(int i) const;
  // NULL, INTEGER, TEXT as SqlValue; REAL and BLOB (never written by safex) -> InvalidArgument.
  Result<SqlValue> Value(int i) const;

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace safex::audit::internal
