// DDL of the PostgreSQL event store. All appends go through tg_append(), which takes a
// transaction-scoped advisory lock first: appenders are serialised, so global positions are
// handed out and committed in one order and a reader trusting "position > checkpoint" can never
// skip an event that commits late. Group commit keeps that single lane fast.

export function eventStoreDdl(schema: string, lockKey: number): string {
  const s = `"${schema}"`;
  return `
CREATE SCHEMA IF NOT EXISTS ${s};

CREATE TABLE IF NOT EXISTS ${s}.events (
  position   bigserial PRIMARY KEY,
  id         uuid NOT NULL UNIQUE,
  stream     text NOT NULL,
  revision   integer NOT NULL,
  type       text NOT NULL,
  data       jsonb NOT NULL,
  metadata   jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  prev_hash  text NOT NULL,
  hash       text NOT NULL,
  UNIQUE (stream, revision)
);

CREATE TABLE IF NOT EXISTS ${s}.streams (
  stream    text PRIMARY KEY,
  revision  integer NOT NULL,
  last_hash text NOT NULL,
  snapshot  jsonb,
  snapshot_revision integer
);

CREATE OR REPLACE FUNCTION ${s}.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  RAISE EXCEPTION 'events are append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $fn$;

DROP TRIGGER IF EXISTS events_append_only ON ${s}.events;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON ${s}.events
  FOR EACH ROW EXECUTE FUNCTION ${s}.refuse_change();
DROP TRIGGER IF EXISTS events_no_truncate ON ${s}.events;
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON ${s}.events
  FOR EACH STATEMENT EXECUTE FUNCTION ${s}.refuse_change();

-- batch: [{stream, expected, snapshot, events: [canonical body text, ...]}]
-- result: one element per entry: {ok, revision, first, last} or {ok:false, actual} or {ok:false, duplicate}
CREATE OR REPLACE FUNCTION ${s}.append(batch jsonb) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  entry jsonb; body text; ev jsonb; results jsonb := '[]'::jsonb;
  cur_rev integer; cur_hash text; new_hash text; pos bigint; first_pos bigint; last_pos bigint := 0; dup uuid;
BEGIN
  PERFORM pg_advisory_xact_lock(${lockKey});
  FOR entry IN SELECT value FROM jsonb_array_elements(batch) LOOP
    SELECT revision, last_hash INTO cur_rev, cur_hash FROM ${s}.streams WHERE stream = entry->>'stream';
    IF NOT FOUND THEN cur_rev := -1; cur_hash := repeat('0', 64); END IF;
    IF cur_rev <> (entry->>'expected')::integer THEN
      results := results || jsonb_build_array(jsonb_build_object('ok', false, 'actual', cur_rev));
      CONTINUE;
    END IF;
    SELECT e.id INTO dup FROM ${s}.events e
      WHERE e.id IN (SELECT (value::jsonb->>'id')::uuid FROM jsonb_array_elements_text(entry->'events')) LIMIT 1;
    IF FOUND THEN
      results := results || jsonb_build_array(jsonb_build_object('ok', false, 'duplicate', dup));
      CONTINUE;
    END IF;
    first_pos := NULL;
    FOR body IN SELECT value FROM jsonb_array_elements_text(entry->'events') LOOP
      ev := body::jsonb;
      cur_rev := cur_rev + 1;
      IF (ev->>'revision')::integer <> cur_rev THEN
        RAISE EXCEPTION 'event body revision % does not follow stream revision %', ev->>'revision', cur_rev - 1;
      END IF;
      new_hash := encode(sha256(convert_to(cur_hash || body, 'UTF8')), 'hex');
      INSERT INTO ${s}.events (id, stream, revision, type, data, metadata, created_at, prev_hash, hash)
        VALUES ((ev->>'id')::uuid, entry->>'stream', cur_rev, ev->>'type', ev->'data', ev->'metadata',
                (ev->>'timestamp')::timestamptz, cur_hash, new_hash)
        RETURNING position INTO pos;
      first_pos := coalesce(first_pos, pos);
      cur_hash := new_hash;
    END LOOP;
    -- A snapshot is kept with the revision it describes; an append without one leaves the old.
    INSERT INTO ${s}.streams (stream, revision, last_hash, snapshot, snapshot_revision)
      VALUES (entry->>'stream', cur_rev, cur_hash, entry->'snapshot',
              CASE WHEN entry ? 'snapshot' THEN cur_rev END)
      ON CONFLICT (stream) DO UPDATE SET revision = excluded.revision, last_hash = excluded.last_hash,
        snapshot = coalesce(excluded.snapshot, ${s}.streams.snapshot),
        snapshot_revision = coalesce(excluded.snapshot_revision, ${s}.streams.snapshot_revision);
    last_pos := pos;
    results := results || jsonb_build_array(jsonb_build_object('ok', true, 'revision', cur_rev, 'first', first_pos, 'last', pos));
  END LOOP;
  IF last_pos > 0 THEN PERFORM pg_notify('${schema}_events', last_pos::text); END IF;
  RETURN results;
END $fn$;
`;
}
