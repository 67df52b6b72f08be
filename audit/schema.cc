#include "audit/schema.h"

#include <string>

namespace safex::audit::internal {

// STRICT tables: a column holds its declared type or NULL, so the values `verify` reads back are
// the values that were hashed. The triggers stop mistakes (an UPDATE or DELETE typed by hand);
// deliberate edits are caught by the hash chain and the signed checkpoints.
//
// Times in the views: ISO-8601 UTC with milliseconds ("2026-11-29T22:26:00.123Z"), computed from
// the integer nanoseconds that are stored.
const char* const kCreateSchemaSql = R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
) STRICT;

CREATE TABLE events (
  seq                  INTEGER PRIMARY KEY NOT NULL,
  kind                 TEXT NOT NULL CHECK (kind IN ('start', 'end', 'refusal', 'interrupted',
                                              'access', 'sandbox', 'session')),
  run_id               TEXT NOT NULL,
  time_ns              INTEGER NOT NULL,
  uid                  INTEGER,
  gid                  INTEGER,
  pid                  INTEGER,
  policy_name          TEXT,
  policy_source_digest TEXT,
  plan_digest          TEXT,
  backend              TEXT,
  backend_mode         TEXT,
  argv                 TEXT,
  exit_code            INTEGER,
  signal               INTEGER,
  verdict              TEXT,
  limits_fired         TEXT,
  wall_ns              INTEGER,
  cpu_ns               INTEGER,
  peak_memory_bytes    INTEGER,
  stdout_bytes         INTEGER,
  stdout_sha256        TEXT,
  stdout_truncated     INTEGER,
  stderr_bytes         INTEGER,
  stderr_sha256        TEXT,
  stderr_truncated     INTEGER,
  validator_results    TEXT,
  denied_egress        TEXT,
  reason               TEXT,
  hash                 TEXT NOT NULL,
  purpose              TEXT,
  enforcement          TEXT
) STRICT;

CREATE INDEX events_run_id ON events (run_id);
CREATE INDEX events_time ON events (time_ns);
-- One start per run id, one end (or interruption) per run id.
CREATE UNIQUE INDEX events_one_start ON events (run_id) WHERE kind = 'start';
CREATE UNIQUE INDEX events_one_end ON events (run_id) WHERE kind IN ('end', 'interrupted');
-- A session's exec runs are found by their purpose ("session ID exec N"), a range of this index.
-- Starts only: an index of every purpose would lure the planner away from events_run_id in the
-- per-id lookups of sandbox and session events (purpose = 'evicted' for each sandbox made).
CREATE INDEX events_start_purpose ON events (purpose)
  WHERE kind = 'start' AND purpose IS NOT NULL;

CREATE TABLE checkpoints (
  id          INTEGER PRIMARY KEY NOT NULL,
  log_id      TEXT NOT NULL,
  event_count INTEGER NOT NULL,
  head_hash   TEXT NOT NULL,
  time_ns     INTEGER NOT NULL,
  public_key  TEXT NOT NULL,
  signature   TEXT NOT NULL
) STRICT;

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'safex audit log is append-only: events cannot be changed'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'safex audit log is append-only: events cannot be deleted'); END;
CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'safex audit log is append-only: checkpoints cannot be changed'); END;
CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'safex audit log is append-only: checkpoints cannot be deleted'); END;
CREATE TRIGGER meta_no_update BEFORE UPDATE ON meta
BEGIN SELECT RAISE(ABORT, 'safex audit log is append-only: meta cannot be changed'); END;
CREATE TRIGGER meta_no_delete BEFORE DELETE ON meta
BEGIN SELECT RAISE(ABORT, 'safex audit log is append-only: meta cannot be deleted'); END;

)sql";

// The auditor views, replaced as a whole when the schema changes (views hold no data).
const char* const kCreateViewsSql = R"sql(
-- One row per run attempt: every start (joined with its end or interruption, if any) and every
-- refusal. state: running (no end yet), finished, interrupted, refused. session_id and
-- exec_index: from a purpose "session ID exec N" (a session's exec run), NULL otherwise.
CREATE VIEW runs AS
SELECT
  s.run_id AS run_id,
  CASE WHEN e.kind IS NULL THEN 'running'
       WHEN e.kind = 'interrupted' THEN 'interrupted'
       ELSE 'finished' END AS state,
  e.verdict AS verdict,
  s.time_ns AS start_ns,
  strftime('%Y-%m-%dT%H:%M:%S', s.time_ns / 1000000000, 'unixepoch')
    || printf('.%03dZ', (s.time_ns / 1000000) % 1000) AS started_at,
  e.time_ns AS end_ns,
  CASE WHEN e.time_ns IS NULL THEN NULL ELSE
    strftime('%Y-%m-%dT%H:%M:%S', e.time_ns / 1000000000, 'unixepoch')
    || printf('.%03dZ', (e.time_ns / 1000000) % 1000) END AS ended_at,
  s.uid AS uid, s.gid AS gid, s.pid AS pid,
  s.policy_name AS policy_name,
  s.policy_source_digest AS policy_source_digest,
  s.plan_digest AS plan_digest,
  s.backend AS backend, s.backend_mode AS backend_mode,
  s.argv AS argv,
  e.exit_code AS exit_code, e.signal AS signal,
  e.limits_fired AS limits_fired,
  e.wall_ns AS wall_ns, e.wall_ns / 1e6 AS wall_ms,
  e.cpu_ns AS cpu_ns, e.cpu_ns / 1e6 AS cpu_ms,
  e.peak_memory_bytes AS peak_memory_bytes,
  e.stdout_bytes AS stdout_bytes, e.stdout_sha256 AS stdout_sha256,
  e.stdout_truncated AS stdout_truncated,
  e.stderr_bytes AS stderr_bytes, e.stderr_sha256 AS stderr_sha256,
  e.stderr_truncated AS stderr_truncated,
  e.validator_results AS validator_results,
  e.denied_egress AS denied_egress,
  e.reason AS reason,
  s.seq AS start_seq, e.seq AS end_seq,
  s.purpose AS purpose,
  e.enforcement AS enforcement,
  CASE WHEN s.purpose GLOB 'session ?* exec [1-9]*'
    THEN substr(s.purpose, 9, instr(s.purpose, ' exec ') - 9) END AS session_id,
  CASE WHEN s.purpose GLOB 'session ?* exec [1-9]*'
    THEN CAST(substr(s.purpose, instr(s.purpose, ' exec ') + 6) AS INTEGER) END AS exec_index
FROM events AS s
LEFT JOIN events AS e ON e.run_id = s.run_id AND e.kind IN ('end', 'interrupted')
WHERE s.kind = 'start'
UNION ALL
SELECT
  r.run_id, 'refused', r.verdict, r.time_ns,
  strftime('%Y-%m-%dT%H:%M:%S', r.time_ns / 1000000000, 'unixepoch')
    || printf('.%03dZ', (r.time_ns / 1000000) % 1000),
  NULL, NULL,
  r.uid, r.gid, r.pid, r.policy_name, r.policy_source_digest, r.plan_digest,
  NULL, NULL, r.argv,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  r.reason, r.seq, NULL,
  r.purpose, NULL,
  CASE WHEN r.purpose GLOB 'session ?* exec [1-9]*'
    THEN substr(r.purpose, 9, instr(r.purpose, ' exec ') - 9) END,
  CASE WHEN r.purpose GLOB 'session ?* exec [1-9]*'
    THEN CAST(substr(r.purpose, instr(r.purpose, ' exec ') + 6) AS INTEGER) END
FROM events AS r
WHERE r.kind = 'refusal';

-- Refused requests only.
CREATE VIEW refusals AS
SELECT run_id, started_at AS refused_at, start_ns AS time_ns, uid, gid, pid, policy_name,
       policy_source_digest, plan_digest, argv, reason, start_seq AS seq, purpose
FROM runs WHERE state = 'refused';

-- One row per (run, limit that fired): limit_name is wall_time, cpu_time, memory, pids,
-- open_files, output or disk.
CREATE VIEW limit_hits AS
SELECT r.run_id, r.started_at, r.start_ns, r.policy_name, r.uid, r.verdict,
       l.value AS limit_name, r.peak_memory_bytes, r.wall_ms, r.cpu_ms, r.argv
FROM runs AS r, json_each(r.limits_fired) AS l
WHERE r.limits_fired IS NOT NULL;

-- One row per (run, validator result).
CREATE VIEW validations AS
SELECT r.run_id, r.started_at, r.start_ns, r.policy_name, r.verdict,
       json_extract(v.value, '$.name') AS validator,
       json_extract(v.value, '$.outcome') AS outcome,
       json_extract(v.value, '$.detail') AS detail
FROM runs AS r, json_each(r.validator_results) AS v
WHERE r.validator_results IS NOT NULL;

-- One row per (run, field of what it enforced): read back from the host kernel and the runtime
-- before the program started (docs/audit.md, "Evidence"). state: matches, differs, observed,
-- not-observed (then probe names the built-in probe of `safex test --builtin` that tests it).
CREATE VIEW enforcement AS
SELECT r.run_id, r.started_at, r.start_ns, r.policy_name, r.backend, r.verdict,
       json_extract(f.value, '$.name') AS field,
       json_extract(f.value, '$.state') AS state,
       json_extract(f.value, '$.expected') AS expected,
       json_extract(f.value, '$.observed') AS observed,
       json_extract(f.value, '$.source') AS source,
       json_extract(f.value, '$.probe') AS probe
FROM runs AS r, json_each(r.enforcement, '$.fields') AS f
WHERE r.enforcement IS NOT NULL AND json_valid(r.enforcement);

-- What an auditor should look at: runs that ended without evidence (older versions, a backend
-- that records none), and every field that differed (the run was refused) or that the host could
-- not observe.
CREATE VIEW enforcement_gaps AS
SELECT run_id, started_at, start_ns, policy_name, backend, verdict,
       'not recorded' AS gap, NULL AS field, NULL AS source, NULL AS probe
FROM runs WHERE state IN ('finished', 'interrupted') AND enforcement IS NULL
UNION ALL
SELECT run_id, started_at, start_ns, policy_name, backend, verdict, state, field, source, probe
FROM enforcement WHERE state IN ('differs', 'not-observed');

-- Who read what a run left (the service's file downloads), one row per access.
CREATE VIEW accesses AS
SELECT run_id, time_ns,
  strftime('%Y-%m-%dT%H:%M:%S', time_ns / 1000000000, 'unixepoch')
    || printf('.%03dZ', (time_ns / 1000000) % 1000) AS accessed_at,
  uid, gid, pid, reason AS what, seq
FROM events WHERE kind = 'access';

-- The warm pool's sandboxes (docs/operating.md), one row per sandbox made: its plan, what it
-- enforced, when it was destroyed unused and why (NULL: it served a run, or it still waits), and
-- the run it served (the run's evidence names it; NULL when none did).
CREATE VIEW sandboxes AS
SELECT m.run_id AS sandbox_id,
  strftime('%Y-%m-%dT%H:%M:%S', m.time_ns / 1000000000, 'unixepoch')
    || printf('.%03dZ', (m.time_ns / 1000000) % 1000) AS made_at,
  m.time_ns AS made_ns, m.policy_name, m.plan_digest, m.backend, m.backend_mode,
  m.enforcement,
  e.time_ns AS evicted_ns, e.reason AS evicted_because,
  (SELECT r.run_id FROM events AS r
   WHERE r.kind = 'end' AND instr(r.enforcement, '"pooled ' || m.run_id || ' ') > 0) AS served_run,
  m.seq
FROM events AS m
LEFT JOIN events AS e ON e.run_id = m.run_id AND e.kind = 'sandbox' AND e.purpose = 'evicted'
WHERE m.kind = 'sandbox' AND m.purpose = 'made';

-- Agent sessions (docs/audit.md, "Sessions"), one row per session opened: uid is the one caller
-- it serves; its plan and what its sandbox enforced; when, why and by whom it was closed (NULL:
-- still open); how many exec runs it started (runs whose purpose names it: a range of the
-- events_start_purpose index, since N is digits and ':' follows '9') and files it took in and
-- gave out.
CREATE VIEW sessions AS
SELECT o.run_id AS session_id,
  strftime('%Y-%m-%dT%H:%M:%S', o.time_ns / 1000000000, 'unixepoch')
    || printf('.%03dZ', (o.time_ns / 1000000) % 1000) AS opened_at,
  o.time_ns AS opened_ns, o.uid AS uid, o.policy_name, o.plan_digest, o.backend,
  o.backend_mode, o.enforcement,
  CASE WHEN c.time_ns IS NULL THEN NULL ELSE
    strftime('%Y-%m-%dT%H:%M:%S', c.time_ns / 1000000000, 'unixepoch')
    || printf('.%03dZ', (c.time_ns / 1000000) % 1000) END AS closed_at,
  c.time_ns AS closed_ns, c.reason AS closed_because, c.uid AS closed_uid,
  (SELECT count(*) FROM events AS r
   WHERE r.kind = 'start' AND r.purpose >= 'session ' || o.run_id || ' exec '
     AND r.purpose < 'session ' || o.run_id || ' exec :') AS execs,
  (SELECT count(*) FROM events AS f
   WHERE f.run_id = o.run_id AND f.kind = 'session' AND f.purpose = 'file-in') AS files_in,
  (SELECT count(*) FROM events AS f
   WHERE f.run_id = o.run_id AND f.kind = 'session' AND f.purpose = 'file-out') AS files_out,
  o.seq
FROM events AS o
LEFT JOIN events AS c ON c.run_id = o.run_id AND c.kind = 'session' AND c.purpose = 'closed'
WHERE o.kind = 'session' AND o.purpose = 'opened';

-- One row per file put into (direction in) or taken out of (out) a session: the path, its size
-- and SHA-256 (stored as {"bytes":N,"sha256":"H"} in the event's enforcement column), and who.
CREATE VIEW session_files AS
SELECT run_id AS session_id,
  CASE purpose WHEN 'file-in' THEN 'in' ELSE 'out' END AS direction,
  reason AS path,
  CASE WHEN json_valid(enforcement) THEN json_extract(enforcement, '$.bytes') END AS bytes,
  CASE WHEN json_valid(enforcement) THEN json_extract(enforcement, '$.sha256') END AS sha256,
  strftime('%Y-%m-%dT%H:%M:%S', time_ns / 1000000000, 'unixepoch')
    || printf('.%03dZ', (time_ns / 1000000) % 1000) AS at,
  time_ns, uid, seq
FROM events WHERE kind = 'session' AND purpose IN ('file-in', 'file-out');

-- One row per (run, destination the network layer refused).
CREATE VIEW egress_denials AS
SELECT r.run_id, r.started_at, r.start_ns, r.policy_name,
       json_extract(d.value, '$.destination') AS destination,
       json_extract(d.value, '$.count') AS attempts
FROM runs AS r, json_each(r.denied_egress) AS d
WHERE r.denied_egress IS NOT NULL;
)sql";

// No append-only triggers: the row moves forward with every successful check. id = 1 keeps it
// one row. Times are unix nanoseconds; verified_hash is the chain hash of event verified_seq (the
// genesis hash for 0).
const char* const kCreateIntegrityMarkerSql = R"sql(
CREATE TABLE IF NOT EXISTS integrity_marker (
  id            INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
  log_id        TEXT NOT NULL,
  verified_seq  INTEGER NOT NULL,
  verified_hash TEXT NOT NULL,
  verified_ns   INTEGER NOT NULL,
  full_ns       INTEGER NOT NULL
) STRICT;
)sql";

}  // namespace safex::audit::internal

namespace safex::audit::internal {

// Version 1 -> 2: two nullable columns (purpose, enforcement) and the views that show them. Old
// rows keep their values and their hashes (event_row.h). Run by the first writer, inside its
// transaction; the views are recreated from kCreateViewsSql.
const char* const kMigrateV1ToV2Sql = R"sql(
ALTER TABLE events ADD COLUMN purpose TEXT;
ALTER TABLE events ADD COLUMN enforcement TEXT;
DROP VIEW IF EXISTS egress_denials;
DROP VIEW IF EXISTS validations;
DROP VIEW IF EXISTS limit_hits;
DROP VIEW IF EXISTS refusals;
DROP VIEW IF EXISTS runs;
)sql";

// Version 2, 3 or 4 -> current: SQLite cannot widen a CHECK in place, so the events table is
// rebuilt: a new table with the current definition, every row copied column by column (values
// unchanged: the hashes still verify), the old table and its triggers dropped, the new one
// renamed, its indexes and append-only triggers made again. Run by the first writer inside its
// transaction.
std::string RebuildEventsSql() {
  // The new table is the one kCreateSchemaSql makes (one definition, never two).
  const std::string schema = kCreateSchemaSql;
  const size_t begin = schema.find("CREATE TABLE events (");
  const size_t end = schema.find(") STRICT;", begin) + std::string(") STRICT;").size();
  std::string table = schema.substr(begin, end - begin);
  table.replace(0, std::string("CREATE TABLE events").size(), "CREATE TABLE events_new");
  return R"sql(
DROP VIEW IF EXISTS session_files;
DROP VIEW IF EXISTS sessions;
DROP VIEW IF EXISTS sandboxes;
DROP VIEW IF EXISTS accesses;
DROP VIEW IF EXISTS egress_denials;
DROP VIEW IF EXISTS enforcement_gaps;
DROP VIEW IF EXISTS enforcement;
DROP VIEW IF EXISTS validations;
DROP VIEW IF EXISTS limit_hits;
DROP VIEW IF EXISTS refusals;
DROP VIEW IF EXISTS runs;
DROP TRIGGER IF EXISTS events_no_update;
DROP TRIGGER IF EXISTS events_no_delete;
)sql" + table +
         R"sql(
INSERT INTO events_new (seq, kind, run_id, time_ns, uid, gid, pid, policy_name,
  policy_source_digest, plan_digest, backend, backend_mode, argv, exit_code, signal, verdict,
  limits_fired, wall_ns, cpu_ns, peak_memory_bytes, stdout_bytes, stdout_sha256,
  stdout_truncated, stderr_bytes, stderr_sha256, stderr_truncated, validator_results,
  denied_egress, reason, hash, purpose, enforcement)
SELECT seq, kind, run_id, time_ns, uid, gid, pid, policy_name,
  policy_source_digest, plan_digest, backend, backend_mode, argv, exit_code, signal, verdict,
  limits_fired, wall_ns, cpu_ns, peak_memory_bytes, stdout_bytes, stdout_sha256,
  stdout_truncated, stderr_bytes, stderr_sha256, stderr_truncated, validator_results,
  denied_egress, reason, hash, purpose, enforcement
FROM events ORDER BY seq;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_run_id ON events (run_id);
CREATE INDEX events_time ON events (time_ns);
CREATE UNIQUE INDEX events_one_start ON events (run_id) WHERE kind = 'start';
CREATE UNIQUE INDEX events_one_end ON events (run_id) WHERE kind IN ('end', 'interrupted');
CREATE INDEX events_start_purpose ON events (purpose)
  WHERE kind = 'start' AND purpose IS NOT NULL;
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'safex audit log is append-only: events cannot be changed'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'safex audit log is append-only: events cannot be deleted'); END;
)sql";
}

}  // namespace safex::audit::internal
