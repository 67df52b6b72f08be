// The audit database's schema: tables, append-only triggers and the auditor views
// (docs/audit.md describes every column). Internal to the audit library.
#pragma once

#include <cstdint>
#include <string>

namespace safex::audit::internal {

// PRAGMA application_id: 'SFXA'. A database with another id is not ours and is refused.
inline constexpr int32_t kApplicationId = 0x53465841;
// PRAGMA user_version: bumped on any change to the tables or the canonical encoding.
// 2: events.purpose and events.enforcement (2026-12). Writers migrate a version 1 log in place
// (kMigrateV1ToV2Sql); readers read version 1 logs as they are (the new columns read as NULL).
// 3: the event kind `access` (who fetched what a run left) and the `accesses` view (2026-12).
// Writers migrate by rebuilding the events table with the wider kind check (RebuildEventsSql():
// every row copied as it is, so every hash still verifies); readers read older logs as they are.
// 4: the event kind `sandbox` (the warm pool's sandboxes made and evicted) and the `sandboxes`
// view (2026-12). Migrated the same way from version 2 or 3.
// 5: the event kind `session` (agent sessions: opened, files in and out, closed), the index
// events_start_purpose (a session's exec runs, by purpose), and the `sessions` and
// `session_files` views; `runs` gains session_id and exec_index (2026-12). Migrated the same way
// from 2, 3 or 4.
inline constexpr int32_t kSchemaVersion = 5;
inline constexpr int32_t kOldestReadableSchemaVersion = 1;

// Creates tables, indexes and triggers. Run once, inside the creating transaction, followed by
// kCreateViewsSql.
extern const char* const kCreateSchemaSql;
// The auditor views.
extern const char* const kCreateViewsSql;
// Adds the version 2 columns and drops the views (recreate them with kCreateViewsSql).
extern const char* const kMigrateV1ToV2Sql;
// Rebuilds `events` (version 2 columns) with the current kind check, its indexes and its
// append-only triggers; drops the views (recreate them with kCreateViewsSql).
std::string RebuildEventsSql();

// The integrity marker: one row, updated in place, never part of the hash chain (a check only
// reads it as a claim to test against the chain). It is outside the versioned schema so that
// logs made before it existed stay readable: writers create it when it is missing (IF NOT
// EXISTS), readers treat a missing table as "no marker".
inline constexpr char kIntegrityMarkerTable[] = "integrity_marker";
extern const char* const kCreateIntegrityMarkerSql;

}  // namespace safex::audit::internal
