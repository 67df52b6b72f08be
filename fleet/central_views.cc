// The auditor views of the central database: the node's views (audit/schema.cc), over every
// enrolled log, each row led by the host and log it came from. Columns keep the node's names
// and meanings (docs/audit.md); JSON columns are read through safex.try_jsonb.
#include <string>

#include "fleet/central_schema.h"

namespace safex::fleet::internal {
namespace {

constexpr char kRunsSql[] = R"sql(
CREATE VIEW safex.runs AS
SELECT l.host, s.log_id, s.run_id,
  CASE WHEN e.kind IS NULL THEN 'running'
       WHEN e.kind = 'interrupted' THEN 'interrupted'
       ELSE 'finished' END AS state,
  e.verdict, s.time_ns AS start_ns, safex.iso(s.time_ns) AS started_at,
  e.time_ns AS end_ns, safex.iso(e.time_ns) AS ended_at,
  s.uid, s.gid, s.pid, s.policy_name, s.policy_source_digest, s.plan_digest,
  s.backend, s.backend_mode, s.argv, e.exit_code, e.signal, e.limits_fired,
  e.wall_ns, e.wall_ns / 1e6 AS wall_ms, e.cpu_ns, e.cpu_ns / 1e6 AS cpu_ms,
  e.peak_memory_bytes, e.stdout_bytes, e.stdout_sha256, e.stdout_truncated,
  e.stderr_bytes, e.stderr_sha256, e.stderr_truncated, e.validator_results, e.denied_egress,
  e.reason, s.seq AS start_seq, e.seq AS end_seq, s.purpose, e.enforcement,
  substring(s.purpose from '^session (.+) exec [1-9][0-9]*$') AS session_id,
  CAST(substring(s.purpose from '^session .+ exec ([1-9][0-9]*)$') AS bigint) AS exec_index
FROM safex.events AS s
JOIN safex.logs AS l ON l.log_id = s.log_id
LEFT JOIN safex.events AS e
  ON e.log_id = s.log_id AND e.run_id = s.run_id AND e.kind IN ('end', 'interrupted')
WHERE s.kind = 'start'
UNION ALL
SELECT l.host, r.log_id, r.run_id, 'refused', r.verdict, r.time_ns, safex.iso(r.time_ns),
  NULL, NULL, r.uid, r.gid, r.pid, r.policy_name, r.policy_source_digest, r.plan_digest,
  NULL, NULL, r.argv, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, r.reason, r.seq, NULL, r.purpose, NULL,
  substring(r.purpose from '^session (.+) exec [1-9][0-9]*$'),
  CAST(substring(r.purpose from '^session .+ exec ([1-9][0-9]*)$') AS bigint)
FROM safex.events AS r
JOIN safex.logs AS l ON l.log_id = r.log_id
WHERE r.kind = 'refusal';

CREATE VIEW safex.refusals AS
SELECT host, log_id, run_id, started_at AS refused_at, start_ns AS time_ns, uid, gid, pid,
       policy_name, policy_source_digest, plan_digest, argv, reason, start_seq AS seq, purpose
FROM safex.runs WHERE state = 'refused';

CREATE VIEW safex.limit_hits AS
SELECT r.host, r.log_id, r.run_id, r.started_at, r.start_ns, r.policy_name, r.uid, r.verdict,
       l #>> '{}' AS limit_name, r.peak_memory_bytes, r.wall_ms, r.cpu_ms, r.argv
FROM safex.runs AS r, safex.json_items(r.limits_fired) AS l
WHERE r.limits_fired IS NOT NULL;

CREATE VIEW safex.validations AS
SELECT r.host, r.log_id, r.run_id, r.started_at, r.start_ns, r.policy_name, r.verdict,
       v ->> 'name' AS validator, v ->> 'outcome' AS outcome, v ->> 'detail' AS detail
FROM safex.runs AS r, safex.json_items(r.validator_results) AS v
WHERE r.validator_results IS NOT NULL;

CREATE VIEW safex.egress_denials AS
SELECT r.host, r.log_id, r.run_id, r.started_at, r.start_ns, r.policy_name,
       d ->> 'destination' AS destination, (d ->> 'count')::bigint AS attempts
FROM safex.runs AS r, safex.json_items(r.denied_egress) AS d
WHERE r.denied_egress IS NOT NULL;

CREATE VIEW safex.enforcement AS
SELECT r.host, r.log_id, r.run_id, r.started_at, r.start_ns, r.policy_name, r.backend, r.verdict,
       f ->> 'name' AS field, f ->> 'state' AS state, f ->> 'expected' AS expected,
       f ->> 'observed' AS observed, f ->> 'source' AS source, f ->> 'probe' AS probe
FROM safex.runs AS r,
     LATERAL jsonb_array_elements(
       CASE WHEN jsonb_typeof(safex.try_jsonb(r.enforcement) -> 'fields') = 'array'
            THEN safex.try_jsonb(r.enforcement) -> 'fields' ELSE '[]'::jsonb END) AS f
WHERE r.enforcement IS NOT NULL;

CREATE VIEW safex.enforcement_gaps AS
SELECT host, log_id, run_id, started_at, start_ns, policy_name, backend, verdict,
       'not recorded' AS gap, NULL AS field, NULL AS source, NULL AS probe
FROM safex.runs WHERE state IN ('finished', 'interrupted') AND enforcement IS NULL
UNION ALL
SELECT host, log_id, run_id, started_at, start_ns, policy_name, backend, verdict, state, field,
       source, probe
FROM safex.enforcement WHERE state IN ('differs', 'not-observed');
)sql";

constexpr char kOtherViewsSql[] = R"sql(
CREATE VIEW safex.accesses AS
SELECT l.host, e.log_id, e.run_id, e.time_ns, safex.iso(e.time_ns) AS accessed_at,
       e.uid, e.gid, e.pid, e.reason AS what, e.seq
FROM safex.events AS e JOIN safex.logs AS l ON l.log_id = e.log_id
WHERE e.kind = 'access';

CREATE VIEW safex.sandboxes AS
SELECT l.host, m.log_id, m.run_id AS sandbox_id, safex.iso(m.time_ns) AS made_at,
  m.time_ns AS made_ns, m.policy_name, m.plan_digest, m.backend, m.backend_mode, m.enforcement,
  e.time_ns AS evicted_ns, e.reason AS evicted_because,
  (SELECT r.run_id FROM safex.events AS r
   WHERE r.log_id = m.log_id AND r.kind = 'end'
     AND strpos(r.enforcement, '"pooled ' || m.run_id || ' ') > 0 LIMIT 1) AS served_run,
  m.seq
FROM safex.events AS m
JOIN safex.logs AS l ON l.log_id = m.log_id
LEFT JOIN safex.events AS e ON e.log_id = m.log_id AND e.run_id = m.run_id
  AND e.kind = 'sandbox' AND e.purpose = 'evicted'
WHERE m.kind = 'sandbox' AND m.purpose = 'made';

CREATE VIEW safex.sessions AS
SELECT l.host, o.log_id, o.run_id AS session_id, safex.iso(o.time_ns) AS opened_at,
  o.time_ns AS opened_ns, o.uid, o.policy_name, o.plan_digest, o.backend, o.backend_mode,
  o.enforcement, safex.iso(c.time_ns) AS closed_at, c.time_ns AS closed_ns,
  c.reason AS closed_because, c.uid AS closed_uid,
  (SELECT count(*) FROM safex.events AS r
   WHERE r.log_id = o.log_id AND r.kind = 'start'
     AND r.purpose ~ ('^session ' || o.run_id || ' exec [1-9][0-9]*$')) AS execs,
  (SELECT count(*) FROM safex.events AS f WHERE f.log_id = o.log_id AND f.run_id = o.run_id
     AND f.kind = 'session' AND f.purpose = 'file-in') AS files_in,
  (SELECT count(*) FROM safex.events AS f WHERE f.log_id = o.log_id AND f.run_id = o.run_id
     AND f.kind = 'session' AND f.purpose = 'file-out') AS files_out,
  o.seq
FROM safex.events AS o
JOIN safex.logs AS l ON l.log_id = o.log_id
LEFT JOIN safex.events AS c ON c.log_id = o.log_id AND c.run_id = o.run_id
  AND c.kind = 'session' AND c.purpose = 'closed'
WHERE o.kind = 'session' AND o.purpose = 'opened';

CREATE VIEW safex.session_files AS
SELECT l.host, e.log_id, e.run_id AS session_id,
  CASE e.purpose WHEN 'file-in' THEN 'in' ELSE 'out' END AS direction,
  e.reason AS path, (safex.try_jsonb(e.enforcement) ->> 'bytes')::bigint AS bytes,
  safex.try_jsonb(e.enforcement) ->> 'sha256' AS sha256, safex.iso(e.time_ns) AS at,
  e.time_ns, e.uid, e.seq
FROM safex.events AS e JOIN safex.logs AS l ON l.log_id = e.log_id
WHERE e.kind = 'session' AND e.purpose IN ('file-in', 'file-out');

-- Per host: how far its log is shipped, and when it last shipped.
CREATE VIEW safex.hosts AS
SELECT l.host, l.log_id, l.public_key, l.shipper, l.enrolled_at,
  (SELECT max(seq) FROM safex.events AS e WHERE e.log_id = l.log_id) AS shipped_seq,
  (SELECT max(shipped_at) FROM safex.events AS e WHERE e.log_id = l.log_id) AS last_shipped_at,
  (SELECT count(*) FROM safex.checkpoints AS c WHERE c.log_id = l.log_id) AS checkpoints
FROM safex.logs AS l;
)sql";

}  // namespace

std::string CentralViewsSql() { return std::string(kRunsSql) + kOtherViewsSql; }

}  // namespace safex::fleet::internal
