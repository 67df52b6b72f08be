// The SQL of the central audit database (central_schema.h). PostgreSQL 13 or newer.
#include <string>

#include "fleet/central_schema.h"

namespace safex::fleet::internal {
namespace {

// Roles first (cluster-wide, so only when missing), then the schema and its tables. The events
// table keeps each event's canonical bytes exactly as the node hashed them (bytea: argv and
// reasons may hold any bytes), the node's chain hash, and the projected columns the views read.
constexpr char kTablesSql[] = R"sql(
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'safex_shipper') THEN
    CREATE ROLE safex_shipper NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'safex_auditor') THEN
    CREATE ROLE safex_auditor NOLOGIN;
  END IF;
END $$;

CREATE SCHEMA safex;
REVOKE ALL ON SCHEMA safex FROM PUBLIC;

CREATE TABLE safex.meta (
  key   text PRIMARY KEY,
  value text NOT NULL
);

-- One row per node log: its id (the node's meta.log_id), the host it is known by, and the
-- Ed25519 key its checkpoints must be signed with, pinned when it was enrolled. shipper: the
-- role that may ship it (NULL: any member of safex_shipper).
CREATE TABLE safex.logs (
  log_id      text PRIMARY KEY CHECK (log_id ~ '^[0-9a-f]{32}$'),
  host        text NOT NULL UNIQUE CHECK (host ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$'),
  public_key  text NOT NULL CHECK (public_key ~ '^[0-9a-f]{64}$'),
  shipper     text,
  enrolled_at timestamptz NOT NULL DEFAULT now(),
  enrolled_by text NOT NULL DEFAULT session_user
);

-- The node's nth checkpoint is ordinal n.
CREATE TABLE safex.checkpoints (
  log_id      text NOT NULL REFERENCES safex.logs (log_id),
  ordinal     bigint NOT NULL,
  event_count bigint NOT NULL,
  head_hash   text NOT NULL,
  time_ns     bigint NOT NULL,
  public_key  text NOT NULL,
  signature   text NOT NULL,
  shipped_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (log_id, ordinal)
);
)sql";

// Appends only. Each insert is checked by a SECURITY DEFINER function (it reads rows the
// shipper may not): the log is enrolled, the session's role may ship it, and the rows are the
// next ones (seq = last + 1, ordinal = last + 1). Two shippers of one log race on the primary
// key: the second gets a unique violation and retries from the new head. UPDATE, DELETE and
// TRUNCATE are refused for everyone, the owner included (who can still disable the triggers:
// what verify --central is for).
//
// The last-seq lookups must use the primary key: a plan made while the table had no statistics
// (a fresh central, a bulk first ship) chose a scan of the log's every row, which per inserted
// row made a ship quadratic in the log's size (measured: 720 events/s at 20,000 events). So the
// primary key is the only index that leads with log_id, enable_seqscan is off in these
// functions, and events are checked once per statement.
constexpr char kTriggersSql[] = R"sql(
CREATE FUNCTION safex.check_shipper(p_log_id text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = safex, pg_temp AS $$
DECLARE
  allowed text;
BEGIN
  SELECT shipper INTO allowed FROM safex.logs WHERE log_id = p_log_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'log % is not enrolled (safex audit central enrol)', p_log_id;
  END IF;
  IF allowed IS NOT NULL AND NOT pg_has_role(session_user, allowed, 'MEMBER') THEN
    RAISE EXCEPTION 'role % may not ship log % (enrolled for role %)',
      session_user, p_log_id, allowed USING ERRCODE = '42501';
  END IF;
END $$;

-- Once per INSERT or COPY statement, over the rows it added (a transition table): per log, the
-- shipper may ship it, and the rows are exactly the next ones, last + 1 onwards without a gap
-- (the primary key rules out duplicates, so count = range). Once per statement, not per row:
-- a batch of thousands costs one lookup, and no plan can make it cost one per row.
CREATE FUNCTION safex.events_append() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = safex, pg_temp SET enable_seqscan = off AS $$
DECLARE
  b record;
  last bigint;
BEGIN
  FOR b IN SELECT log_id, min(seq) AS lo, max(seq) AS hi, count(*) AS n
           FROM new_rows GROUP BY log_id LOOP
    PERFORM safex.check_shipper(b.log_id);
    SELECT seq INTO last FROM safex.events WHERE log_id = b.log_id AND seq < b.lo
      ORDER BY seq DESC LIMIT 1;
    IF b.lo <> coalesce(last, 0) + 1 OR b.hi - b.lo + 1 <> b.n THEN
      RAISE EXCEPTION 'log %: events %..% are not the next ones (the last shipped is %)',
        b.log_id, b.lo, b.hi, coalesce(last, 0) USING ERRCODE = '23505';
    END IF;
  END LOOP;
  RETURN NULL;
END $$;

CREATE FUNCTION safex.checkpoints_append() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = safex, pg_temp SET enable_seqscan = off AS $$
DECLARE
  last bigint;
  pinned text;
  shipped bigint;
BEGIN
  PERFORM safex.check_shipper(NEW.log_id);
  SELECT public_key INTO pinned FROM safex.logs WHERE log_id = NEW.log_id;
  IF NEW.public_key <> pinned THEN
    RAISE EXCEPTION 'log %: checkpoint % is signed by key %, not by the key pinned at enrolment (%)',
      NEW.log_id, NEW.ordinal, NEW.public_key, pinned;
  END IF;
  SELECT max(ordinal) INTO last FROM safex.checkpoints WHERE log_id = NEW.log_id;
  IF NEW.ordinal <> coalesce(last, 0) + 1 THEN
    RAISE EXCEPTION 'log %: checkpoint % is not the next one (the last shipped is %)',
      NEW.log_id, NEW.ordinal, coalesce(last, 0) USING ERRCODE = '23505';
  END IF;
  SELECT coalesce(max(seq), 0) INTO shipped FROM safex.events WHERE log_id = NEW.log_id;
  IF NEW.event_count > shipped THEN
    RAISE EXCEPTION 'log %: checkpoint % covers % events, only % are shipped',
      NEW.log_id, NEW.ordinal, NEW.event_count, shipped;
  END IF;
  NEW.shipped_at := now();
  RETURN NEW;
END $$;

CREATE FUNCTION safex.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the central audit trail is append-only: % on %.% refused',
    TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = '42501';
END $$;

CREATE TRIGGER events_append AFTER INSERT ON safex.events
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION safex.events_append();
CREATE TRIGGER checkpoints_append BEFORE INSERT ON safex.checkpoints
  FOR EACH ROW EXECUTE FUNCTION safex.checkpoints_append();
CREATE TRIGGER events_no_change BEFORE UPDATE OR DELETE ON safex.events
  FOR EACH ROW EXECUTE FUNCTION safex.refuse_change();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON safex.events
  FOR EACH STATEMENT EXECUTE FUNCTION safex.refuse_change();
CREATE TRIGGER checkpoints_no_change BEFORE UPDATE OR DELETE ON safex.checkpoints
  FOR EACH ROW EXECUTE FUNCTION safex.refuse_change();
CREATE TRIGGER checkpoints_no_truncate BEFORE TRUNCATE ON safex.checkpoints
  FOR EACH STATEMENT EXECUTE FUNCTION safex.refuse_change();
CREATE TRIGGER logs_no_change BEFORE UPDATE OR DELETE ON safex.logs
  FOR EACH ROW EXECUTE FUNCTION safex.refuse_change();
CREATE TRIGGER logs_no_truncate BEFORE TRUNCATE ON safex.logs
  FOR EACH STATEMENT EXECUTE FUNCTION safex.refuse_change();
CREATE TRIGGER meta_no_change BEFORE UPDATE OR DELETE ON safex.meta
  FOR EACH ROW EXECUTE FUNCTION safex.refuse_change();
CREATE TRIGGER meta_no_truncate BEFORE TRUNCATE ON safex.meta
  FOR EACH STATEMENT EXECUTE FUNCTION safex.refuse_change();

-- What a shipper needs to know and may not SELECT itself: where the central copy of its log
-- ends (last event and its hash, last checkpoint), and the host and key it was enrolled with.
CREATE FUNCTION safex.ship_state(p_log_id text)
RETURNS TABLE (host text, public_key text, last_seq bigint, last_hash text, last_ordinal bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = safex, pg_temp AS $$
  SELECT l.host, l.public_key,
    coalesce((SELECT e.seq FROM safex.events e WHERE e.log_id = l.log_id
              ORDER BY e.seq DESC LIMIT 1), 0),
    (SELECT e.hash FROM safex.events e WHERE e.log_id = l.log_id ORDER BY e.seq DESC LIMIT 1),
    coalesce((SELECT max(c.ordinal) FROM safex.checkpoints c WHERE c.log_id = l.log_id), 0)
  FROM safex.logs l WHERE l.log_id = p_log_id
$$;
)sql";

// Helpers of the views: ISO-8601 UTC with milliseconds from unix nanoseconds (as the node's
// views show times), and JSON that tolerates text that is not JSON (an edited row must not stop
// an auditor's query; verify --central names it).
constexpr char kViewHelpersSql[] = R"sql(
CREATE FUNCTION safex.iso(ns bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT to_char(to_timestamp(ns / 1000000000.0) AT TIME ZONE 'UTC',
                 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;
CREATE FUNCTION safex.try_jsonb(t text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN t::jsonb;
EXCEPTION WHEN others THEN
  RETURN NULL;
END $$;
CREATE FUNCTION safex.json_items(t text) RETURNS SETOF jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT v FROM jsonb_array_elements(
    CASE WHEN jsonb_typeof(safex.try_jsonb(t)) = 'array' THEN safex.try_jsonb(t)
         ELSE '[]'::jsonb END) AS v
$$;
)sql";

}  // namespace

// The events table is built from the node's column list, so that a column added to the node
// schema is a column here too (with the same INTEGER/TEXT split).
std::string CreateCentralSql() {
  std::string events =
      "CREATE TABLE safex.events (\n"
      "  log_id text NOT NULL REFERENCES safex.logs (log_id),\n"
      "  seq bigint NOT NULL,\n"
      "  canonical bytea NOT NULL,\n"
      "  hash text NOT NULL,\n"
      "  shipped_at timestamptz NOT NULL DEFAULT now(),\n";
  const auto names = audit::EventColumnNames();
  for (size_t i = audit::kColKind; i < names.size(); ++i) {
    events += "  " + std::string(names[i]) +
              (IsIntegerColumn(static_cast<audit::EventColumn>(i)) ? " bigint,\n" : " text,\n");
  }
  events +=
      "  PRIMARY KEY (log_id, seq)\n);\n"
      "CREATE INDEX events_run ON safex.events (run_id, log_id);\n"
      "CREATE INDEX events_time ON safex.events (time_ns);\n";
  return std::string(kTablesSql) + events + kTriggersSql + kViewHelpersSql + CentralViewsSql() +
         "INSERT INTO safex.meta VALUES ('schema_version', '" +
         std::to_string(kCentralSchemaVersion) + "');\n" + R"sql(
GRANT USAGE ON SCHEMA safex TO safex_shipper, safex_auditor;
GRANT INSERT ON safex.checkpoints TO safex_shipper;
REVOKE ALL ON FUNCTION safex.ship_state(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION safex.check_shipper(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION safex.ship_state(text) TO safex_shipper;
GRANT SELECT ON ALL TABLES IN SCHEMA safex TO safex_auditor;
)sql" +
         // Every column but shipped_at: its default (now()) is the central's word, not the
         // shipper's.
         "GRANT INSERT (log_id, seq, canonical, hash, " + ProjectedColumnList() +
         ") ON safex.events TO safex_shipper;\n";
}

}  // namespace safex::fleet::internal
