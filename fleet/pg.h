// Thin RAII over libpq for the fleet library (internal): one connection, statements with
// parameters, COPY FROM STDIN, and every failure turned into a Status an operator can act on.
//
// Errors, by what the operator does next:
//   Unavailable        the server cannot be reached, or the connection broke (retry later)
//   PermissionDenied   authentication failed, or the role lacks a privilege (SQLSTATE 28*, 42501)
//   InvalidArgument    the connection string does not parse
//   FailedPrecondition the central schema refuses the statement (a trigger's RAISE, a unique or
//                      check violation): the message is the server's, naming what it refused
//   Internal           anything else, with the server's message and SQLSTATE
// Messages never include the connection string (it may hold a password).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

struct pg_conn;
struct pg_result;

namespace safex::fleet::internal {

// One result set. Values are read in the format the statement asked for (text or binary).
class PgResult {
 public:
  explicit PgResult(pg_result* r) : r_(r) {}
  ~PgResult();
  PgResult(PgResult&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  PgResult& operator=(PgResult&&) = delete;
  PgResult(const PgResult&) = delete;

  int rows() const;
  bool IsNull(int row, int col) const;
  // The raw bytes of a value (text format: its text; binary: its binary form).
  std::string_view Bytes(int row, int col) const;
  std::string Text(int row, int col) const { return std::string(Bytes(row, col)); }
  // A binary-format int8 (bigint) value.
  int64_t Int8(int row, int col) const;

 private:
  pg_result* r_;
};

class PgConn {
 public:
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // `url`: a libpq connection string or URI (postgresql://...). `what` names the target in
  // errors ("the central audit database").
  static Result<std::unique_ptr<PgConn>> Connect(const std::string& url);

  // Runs `sql` with text parameters (nullopt: SQL NULL). `binary_results`: values come back in
  // PostgreSQL's binary format (bytea as raw bytes, int8 as 8 big-endian bytes).
  Result<PgResult> Exec(std::string_view sql,
                        const std::vector<std::optional<std::string>>& params = {},
                        bool binary_results = false);
  // Runs SQL that returns nothing we need (several statements allowed, no parameters).
  Status Run(std::string_view sql);
  // COPY ... FROM STDIN with `data` in COPY's text format; the statement must start the COPY.
  Status CopyIn(std::string_view copy_sql, std::string_view data);

  // The role this connection authenticated as.
  std::string User() const;

 private:
  PgConn() = default;
  Status ResultStatus(pg_result* r, std::string_view what);
  pg_conn* conn_ = nullptr;
};

// A transaction that rolls back unless committed (the connection stays usable either way).
class PgTxn {
 public:
  explicit PgTxn(PgConn* c) : c_(c) {}
  ~PgTxn();
  Status Begin() { return c_->Run("BEGIN"); }
  Status Commit();

 private:
  PgConn* c_;
  bool open_ = true;
};

// COPY text format escaping of one value (backslash, tab, newline, carriage return).
void AppendCopyText(std::string* out, std::string_view text);
// A bytea value in COPY text format: "\\x" and lowercase hex.
void AppendCopyBytea(std::string* out, std::string_view bytes);

}  // namespace safex::fleet::internal
