// One row of the `events` table as plain values, and the conversions between the records of
// records.h and rows. The hash chain (canonical.h) is computed over exactly these values, so what
// `verify` reads back from SQLite is what was hashed.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "audit/records.h"
#include "common/run_id.h"
#include "common/status.h"

namespace safex::audit {

// SQLite's NULL, INTEGER and TEXT (the events table is STRICT and uses no other types).
using SqlValue = std::variant<std::monostate, int64_t, std::string>;

// The columns of `events` that the hash covers, in canonical order (the `hash` column is not one).
enum EventColumn : size_t {
  kColSeq,
  kColKind,
  kColRunId,
  kColTimeNs,
  kColUid,
  kColGid,
  kColPid,
  kColPolicyName,
  kColPolicySourceDigest,
  kColPlanDigest,
  kColBackend,
  kColBackendMode,
  kColArgv,
  kColExitCode,
  kColSignal,
  kColVerdict,
  kColLimitsFired,
  kColWallNs,
  kColCpuNs,
  kColPeakMemoryBytes,
  kColStdoutBytes,
  kColStdoutSha256,
  kColStdoutTruncated,
  kColStderrBytes,
  kColStderrSha256,
  kColStderrTruncated,
  kColValidatorResults,
  kColDeniedEgress,
  kColReason,
  // Schema version 2. A row whose v2 columns are all NULL is encoded (and hashed) with the
  // first kNumV1EventColumns only, exactly as version 1 encoded it: a migrated log's old events
  // keep their hashes, and so does every new event that does not use the new columns.
  kColPurpose,      // "" / NULL: an ordinary run; "test POLICY/NAME", "probe POLICY/NAME"
  kColEnforcement,  // end events: what the run enforced, read back (JSON)
  kNumEventColumns,
};
inline constexpr size_t kNumV1EventColumns = kColPurpose;

// Column names as in the schema, indexed by EventColumn.
std::span<const std::string_view> EventColumnNames();

// Event kinds (the `kind` column).
inline constexpr std::string_view kKindStart = "start";
inline constexpr std::string_view kKindEnd = "end";
inline constexpr std::string_view kKindRefusal = "refusal";
inline constexpr std::string_view kKindInterrupted = "interrupted";
inline constexpr std::string_view kKindAccess = "access";    // schema version 3
inline constexpr std::string_view kKindSandbox = "sandbox";  // schema version 4
// The `purpose` column of a sandbox event: what happened to it.
inline constexpr std::string_view kSandboxMade = "made";
inline constexpr std::string_view kSandboxEvicted = "evicted";
inline constexpr std::string_view kKindSession = "session";  // schema version 5
// The `purpose` column of a session event: what happened to it.
inline constexpr std::string_view kSessionOpened = "opened";
inline constexpr std::string_view kSessionFileIn = "file-in";
inline constexpr std::string_view kSessionFileOut = "file-out";
inline constexpr std::string_view kSessionClosed = "closed";
// What a start's purpose begins with when it names a session (SessionExecPurpose()).
inline constexpr std::string_view kSessionPurposePrefix = "session ";
// "session ID exec ": what every exec purpose of that session begins with, and then only digits.
std::string SessionExecPurposePrefix(std::string_view session_id);

struct EventRow {
  std::array<SqlValue, kNumEventColumns> values;
  std::string hash;  // lowercase hex SHA-256 chain hash; empty until appended

  bool operator==(const EventRow&) const = default;

  int64_t seq() const;                         // 0 when unset
  std::string_view text(EventColumn c) const;  // "" unless the value is TEXT
  std::optional<int64_t> integer(EventColumn c) const;
};

// Record -> row, validating what the log must not accept (bad run id, negative time, a number
// beyond int64, an empty refusal reason, a start's purpose that begins "session " in another
// form than SessionExecPurpose's). `now_ns` fills a zero time. seq is left 0: the writer
// assigns it under the write lock.
Result<EventRow> RowFromStart(const RunStart& r, int64_t now_ns);
Result<EventRow> RowFromEnd(const RunEnd& r, int64_t now_ns);
Result<EventRow> RowFromRefusal(const Refusal& r, int64_t now_ns);
Result<EventRow> RowFromInterrupted(const Interrupted& r, int64_t now_ns);
Result<EventRow> RowFromAccess(const Access& r, int64_t now_ns);
Result<EventRow> RowFromSandbox(const SandboxEvent& r, int64_t now_ns);
// Files: the path in `reason`, and {"bytes":N,"sha256":"H"} in `enforcement` (docs/audit.md,
// "Sessions").
Result<EventRow> RowFromSession(const SessionEvent& r, int64_t now_ns);

// Run ids: the project's one rule (common/run_id.h).
using ::safex::IsValidRunId;

}  // namespace safex::audit
