// DDL of the PostgreSQL event store. Appends run side by side: no ledger-wide lock. A position
// is made of the appending transaction's id (xid8) and the event's place in that transaction,
// so positions follow transaction ids; a reader reads only below the oldest transaction still
// running (its snapshot's xmin). Every append that could still commit therefore lands above what
// any reader has read, and "position > checkpoint" never skips a late commit.

/** Events one transaction may hold: a position keeps this many places per transaction id. */
export const EVENTS_PER_TRANSACTION = 4096;
const PLACE_BITS = 12;

/** Where the positions of this schema start: the transaction id and position of that moment. */
export interface PositionOrigin {
  xid: number;
  position: number;
}

/**
 * SQL condition on an event's position: below the first position no reader may read yet, that
 * of the oldest transaction still running (or of the next one). Positions below it belong to
 * finished transactions only.
 */
export function readableSql(origin: PositionOrigin): string {
  return `position < ${firstPositionSql(origin, 'pg_snapshot_xmin(pg_current_snapshot())')}`;
}

/** SQL for the first position of the transaction `xid` (an xid8 expression): the one rule positions follow. */
function firstPositionSql(origin: PositionOrigin, xid: string): string {
  return `(${origin.position}::bigint + ((${xid}::text::bigint - ${origin.xid}) << ${PLACE_BITS}))`;
}

/**
 * A page of the log ($1: after this position, $2: at most this many events): the next events in
 * position order (with `typesParam`, only events whose type is in that text[] parameter), then
 * cut where `cut` (an upper bound on position) stops holding. The cut is made outside the LIMIT
 * (the same rows as inside: the page is in order, so the cut keeps a prefix) because inside it
 * the two limits on position read as a narrow range to a planner without column statistics
 * (autovacuum off, or before its first ANALYZE), which then sorted the whole rest of the log for
 * every page: a replay of 1M events read 40 pages at about a second each.
 */
export function readPageSql(schema: string, columns: string, cut: string, typesParam?: string): string {
  const typed = typesParam ? ` AND type = ANY(${typesParam}::text[])` : '';
  return `SELECT * FROM (SELECT ${columns} FROM "${schema}".events WHERE position > $1${typed} ORDER BY position LIMIT $2) page
    WHERE ${cut} ORDER BY position`;
}

/** Tables, triggers and the position origin; the append function comes after (appendFunctionDdl). */
export function eventTablesDdl(schema: string): string {
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
-- Every append rewrites its stream's row (revision, hash, snapshot); free room on each page lets
-- that be a HOT update, without a new index entry.
ALTER TABLE ${s}.streams SET (fillfactor = 50);

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

-- Positions start after those of older versions (numbered from a sequence under a ledger-wide
-- lock) and count from the transaction id of the moment this row was made.
CREATE TABLE IF NOT EXISTS ${s}.position_origin (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  xid       bigint NOT NULL,
  position  bigint NOT NULL
);
INSERT INTO ${s}.position_origin (xid, position)
  SELECT pg_current_xact_id()::text::bigint, coalesce(max(position), 0) + 1 FROM ${s}.events
  ON CONFLICT DO NOTHING;
-- The jsonb append of early versions numbered positions from the sequence: it must not run
-- beside this one.
DROP FUNCTION IF EXISTS ${s}.append(jsonb);
`;
}

/** The append functions (append for a batch, append_one for a lone request), with the schema's position origin written in. */
export function appendFunctionDdl(schema: string, origin: PositionOrigin): string {
  const s = `"${schema}"`;
  // A custom setting, local to the transaction, holds the next free place when a transaction
  // appends more than once.
  const placeSetting = `tollgate.next_place_${schema}`;
  /** PL/pgSQL: the transaction's next free place into `place`, refusing more events than it has room for. */
  const takePlaces = (count: string) => `place := coalesce(nullif(current_setting('${placeSetting}', true), '')::bigint, 0);
  IF place + ${count} > ${EVENTS_PER_TRANSACTION} THEN
    RAISE EXCEPTION 'a transaction appends at most ${EVENTS_PER_TRANSACTION} events';
  END IF;`;
  const transactionStart = firstPositionSql(origin, 'pg_current_xact_id()');
  return `

-- Appends a batch of requests. Per request: p_streams, p_snapshots (JSON text; '' for none),
-- p_expected and p_counts (its number of events); per event, request after request: p_ids and
-- p_bodies (canonical body text). Text lists are joined with U+001E, which neither JSON text nor
-- a stream name can contain: splitting them is far cheaper than parsing array or JSON literals.
-- Result, one element per request: {ok, revision, first, last}, {ok:false, actual} or
-- {ok:false, duplicate}.
--
-- Set-based: requests are taken in rounds, round r holding the r-th request of each stream, so a
-- round decides each stream once, against the state earlier rounds left (usually there is one
-- round). A call costs a fixed handful of statements however many requests and events it holds:
-- one to plan the rounds, one duplicate check, then per round one to classify its requests (stale
-- revision, duplicate id, or good) and one to insert the good ones' events with their hash chains
-- and upsert their streams. If the batch repeats an event id, requests go one per round, so a
-- later copy is refused as a duplicate exactly as if the requests had come one by one.
--
-- Appends to one stream take turns on its row in streams (locked in name order, so two batches
-- never deadlock); appends to different streams run side by side and share the disk's flushes.
CREATE OR REPLACE FUNCTION ${s}.append(p_streams text, p_expected integer[], p_snapshots text, p_counts integer[], p_ids text, p_bodies text)
RETURNS jsonb LANGUAGE plpgsql
-- Generic plans take the arrays below as parameters (subscripts are O(1)); custom plans would
-- inline each one as a constant, plan every statement again on each call and walk the constant
-- for every subscript. A generic plan is kept for the connection's life, so it must not be a plan
-- for the empty table the ledger began with: a sequential scan chosen then (no statistics yet)
-- grows with every event until autovacuum's first ANALYZE replans it (appends measured at 0.8 ms
-- growing to 2.2 ms over the first 12,000 events). Every lookup here is by key: no seq scans.
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
DECLARE
  streams text[] := string_to_array(p_streams, E'\x1e');
  snapshots text[] := string_to_array(p_snapshots, E'\x1e', '');
  ids uuid[] := string_to_array(p_ids, E'\x1e');
  bodies text[] := string_to_array(p_bodies, E'\x1e');
  n integer := coalesce(cardinality(p_expected), 0);
  results jsonb[] := array_fill(NULL::jsonb, ARRAY[n]);
  dup uuid[] := array_fill(NULL::uuid, ARRAY[n]);
  firsts integer[]; rounds integer[]; ordered integer[]; members integer[];
  good integer[]; good_rev integer[]; good_hash text[]; done integer[]; done_result jsonb[];
  bad integer[]; bad_result jsonb[];
  distinct_ids boolean; one_round boolean; rec record; ix integer; p integer; q integer;
  total integer; inserted bigint; base bigint; last_pos bigint := 0; found_id uuid;
  placeholders integer; place bigint; origin bigint;
BEGIN
  IF n = 0 THEN RETURN '[]'::jsonb; END IF;
  -- A lone request without snapshot sends '', which splits into no element at all.
  IF p_snapshots = '' THEN snapshots := array_fill(NULL::text, ARRAY[n]); END IF;
  firsts := array_fill(1, ARRAY[n]);
  FOR ix IN 2..n LOOP firsts[ix] := firsts[ix - 1] + p_counts[ix - 1]; END LOOP;
  IF cardinality(streams) <> n OR cardinality(snapshots) <> n OR cardinality(bodies) <> cardinality(ids)
     OR cardinality(ids) <> firsts[n] + p_counts[n] - 1 THEN
    RAISE EXCEPTION 'malformed append batch';
  END IF;
  ${takePlaces('cardinality(ids)')}

  -- Every stream of the batch gets a row (a placeholder at revision -1 for a new one, removed
  -- below if still unused), then the rows are locked: a concurrent append to one of them waits
  -- here and then sees its result.
  INSERT INTO ${s}.streams (stream, revision, last_hash)
    SELECT DISTINCT st, -1, repeat('0', 64) FROM unnest(streams) st ORDER BY 1
    ON CONFLICT DO NOTHING;
  GET DIAGNOSTICS placeholders = ROW_COUNT;
  PERFORM 1 FROM ${s}.streams h WHERE h.stream = ANY (streams) ORDER BY h.stream FOR UPDATE;
  origin := ${transactionStart};

  -- Rounds: the r-th request of a stream goes in round r; ordered lists requests round by round.
  -- (The adapter sends a lone request to append_one; one sent here takes the same path.)
  SELECT (SELECT count(DISTINCT x) FROM unnest(ids) x) = cardinality(ids), array_agg(r ORDER BY i), max(r) = 1, array_agg(i ORDER BY r, i)
    INTO distinct_ids, rounds, one_round, ordered
    FROM (SELECT i::integer, row_number() OVER (PARTITION BY st ORDER BY i) AS r FROM unnest(streams) WITH ORDINALITY u(st, i)) t;
  IF distinct_ids THEN
    -- Ids are distinct, so no round can store an id a later round carries: one look suffices.
    FOR rec IN SELECT e.id FROM ${s}.events e WHERE e.id = ANY (ids) LOOP
      ix := array_position(ids, rec.id);
      ix := (SELECT max(r) FROM generate_series(1, n) r WHERE firsts[r] <= ix);
      dup[ix] := coalesce(dup[ix], rec.id);
    END LOOP;
  ELSE
    rounds := array(SELECT generate_series(1, n));
    ordered := rounds;
    one_round := n = 1;
  END IF;

  p := 1;
  WHILE p <= n LOOP
    IF one_round THEN
      members := ordered;
      q := n + 1;
    ELSE
      q := p;
      WHILE q <= n AND rounds[ordered[q]] = rounds[ordered[p]] LOOP q := q + 1; END LOOP;
      members := ordered[p:q - 1];
    END IF;
    p := q;
    IF NOT distinct_ids THEN
      ix := members[1];
      SELECT e.id INTO found_id FROM ${s}.events e WHERE e.id = ANY (ids[firsts[ix]:firsts[ix] + p_counts[ix] - 1]) LIMIT 1;
      dup[ix] := found_id;
    END IF;

    -- A request on a stale revision is refused (reporting the actual one), then one carrying a
    -- stored event id; the others are good.
    SELECT array_agg(x.i ORDER BY x.i) FILTER (WHERE x.good),
           array_agg(x.rev ORDER BY x.i) FILTER (WHERE x.good),
           array_agg(x.hash ORDER BY x.i) FILTER (WHERE x.good),
           sum(p_counts[x.i]) FILTER (WHERE x.good),
           array_agg(x.i) FILTER (WHERE NOT x.good),
           array_agg(CASE WHEN x.rev <> p_expected[x.i] THEN jsonb_build_object('ok', false, 'actual', x.rev)
                          ELSE jsonb_build_object('ok', false, 'duplicate', dup[x.i]) END) FILTER (WHERE NOT x.good)
      INTO good, good_rev, good_hash, total, bad, bad_result
      FROM (SELECT m.i, coalesce(st.revision, -1) AS rev, coalesce(st.last_hash, repeat('0', 64)) AS hash,
                   coalesce(st.revision, -1) = p_expected[m.i] AND dup[m.i] IS NULL AS good
              FROM unnest(members) m(i) LEFT JOIN ${s}.streams st ON st.stream = streams[m.i]) x;
    FOR ix IN 1..coalesce(cardinality(bad), 0) LOOP results[bad[ix]] := bad_result[ix]; END LOOP;
    CONTINUE WHEN good IS NULL;

    -- Positions follow request order; the hash chain runs through each request's events in a
    -- recursive query (one step per event of the longest request).
    base := origin + place;
    place := place + total;
    last_pos := base + total - 1;
    WITH RECURSIVE req AS (
      SELECT u.i, u.rev, u.hash, firsts[u.i] + p_counts[u.i] - 1 AS last_k,
             base + sum(p_counts[u.i]) OVER (ORDER BY u.i) - p_counts[u.i] AS first_pos
        FROM unnest(good, good_rev, good_hash) u(i, rev, hash)
    ), chain(i, k, last_k, pos, rev, prev, hash) AS (
      SELECT r.i, firsts[r.i], r.last_k, r.first_pos, r.rev + 1, r.hash, encode(sha256(convert_to(r.hash || bodies[firsts[r.i]], 'UTF8')), 'hex')
        FROM req r
      UNION ALL
      SELECT c.i, c.k + 1, c.last_k, c.pos + 1, c.rev + 1, c.hash, encode(sha256(convert_to(c.hash || bodies[c.k + 1], 'UTF8')), 'hex')
        FROM chain c WHERE c.k < c.last_k
    ), ev AS (
      INSERT INTO ${s}.events (position, id, stream, revision, type, data, metadata, created_at, prev_hash, hash)
        SELECT c.pos, b.id, streams[c.i], c.rev, b.type, b.data, b.metadata, b."timestamp", c.prev, c.hash
          FROM chain c CROSS JOIN LATERAL jsonb_to_record(bodies[c.k]::jsonb)
            AS b(id uuid, revision integer, type text, data jsonb, metadata jsonb, "timestamp" timestamptz)
          WHERE b.revision = c.rev
          ORDER BY c.pos
        RETURNING 1
    ), heads AS (
      -- A snapshot is kept with the revision it describes; an append without one leaves the old.
      INSERT INTO ${s}.streams (stream, revision, last_hash, snapshot, snapshot_revision)
        SELECT streams[c.i], c.rev, c.hash, snapshots[c.i]::jsonb, CASE WHEN snapshots[c.i] IS NOT NULL THEN c.rev END
          FROM chain c WHERE c.k = c.last_k
        ON CONFLICT (stream) DO UPDATE SET revision = excluded.revision, last_hash = excluded.last_hash,
          snapshot = coalesce(excluded.snapshot, ${s}.streams.snapshot),
          snapshot_revision = coalesce(excluded.snapshot_revision, ${s}.streams.snapshot_revision)
    )
    SELECT (SELECT count(*) FROM ev),
           array_agg(r.i),
           array_agg(jsonb_build_object('ok', true, 'revision', r.rev + p_counts[r.i], 'first', r.first_pos, 'last', r.first_pos + p_counts[r.i] - 1))
      INTO inserted, done, done_result
      FROM req r;
    IF inserted <> total THEN
      SELECT (bodies[k]::jsonb)->>'revision' AS body_rev, g AS i, k INTO rec
        FROM unnest(good) g, generate_series(firsts[g], firsts[g] + p_counts[g] - 1) k
        WHERE ((bodies[k]::jsonb)->>'revision')::integer IS DISTINCT FROM good_rev[array_position(good, g)] + 1 + k - firsts[g]
        LIMIT 1;
      RAISE EXCEPTION 'event body revision % does not follow stream revision %', rec.body_rev,
        good_rev[array_position(good, rec.i)] + rec.k - firsts[rec.i];
    END IF;
    FOR ix IN 1..cardinality(done) LOOP results[done[ix]] := done_result[ix]; END LOOP;
  END LOOP;
  IF placeholders > 0 THEN DELETE FROM ${s}.streams h WHERE h.stream = ANY (streams) AND h.revision = -1; END IF;
  -- No NOTIFY here: PostgreSQL orders the commits of notifying transactions under one lock, which
  -- would serialise appends again. The appender notifies after its commit (postgres.ts).
  IF last_pos > 0 THEN PERFORM set_config('${placeSetting}', place::text, true); END IF;
  RETURN to_jsonb(results);
END $fn$;

-- One request, the common case (a call's hold, its charge): the same decisions in four
-- statements and none of the batch planning, about half the server time of append() for it.
-- A new stream takes no placeholder row: two first appends to it collide on the events'
-- (stream, revision) key, and the loser is sent again (postgres.ts) and then sees the winner.
-- p_channel, when given, is notified of the last position inside the transaction: the appender
-- asks for it only when no other append of its process is under way, so it orders no commits
-- while it saves a second round trip.
CREATE OR REPLACE FUNCTION ${s}.append_one(p_stream text, p_expected integer, p_snapshot text, p_ids text, p_bodies text, p_channel text)
RETURNS jsonb LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
DECLARE
  ids uuid[] := string_to_array(p_ids, E'\x1e');
  bodies text[] := string_to_array(p_bodies, E'\x1e');
  k integer := cardinality(ids);
  prevs text[] := array_fill(NULL::text, ARRAY[k]);
  hashes text[] := array_fill(NULL::text, ARRAY[k]);
  current_revision integer; head_hash text; place bigint; base bigint; found_id uuid; inserted integer;
BEGIN
  IF k = 0 OR cardinality(bodies) <> k THEN RAISE EXCEPTION 'malformed append batch'; END IF;
  ${takePlaces('k')}
  SELECT st.revision, st.last_hash INTO current_revision, head_hash FROM ${s}.streams st WHERE st.stream = p_stream FOR UPDATE;
  IF NOT FOUND THEN current_revision := -1; head_hash := repeat('0', 64); END IF;
  IF current_revision <> p_expected THEN
    RETURN jsonb_build_array(jsonb_build_object('ok', false, 'actual', current_revision));
  END IF;
  SELECT e.id INTO found_id FROM ${s}.events e WHERE e.id = ANY (ids) LIMIT 1;
  IF found_id IS NOT NULL THEN
    RETURN jsonb_build_array(jsonb_build_object('ok', false, 'duplicate', found_id));
  END IF;
  FOR i IN 1..k LOOP
    prevs[i] := head_hash;
    head_hash := encode(sha256(convert_to(head_hash || bodies[i], 'UTF8')), 'hex');
    hashes[i] := head_hash;
  END LOOP;
  base := ${transactionStart} + place;
  INSERT INTO ${s}.events (position, id, stream, revision, type, data, metadata, created_at, prev_hash, hash)
    SELECT base + u.n - 1, b.id, p_stream, b.revision, b.type, b.data, b.metadata, b."timestamp", u.prev, u.hash
      FROM unnest(bodies, prevs, hashes) WITH ORDINALITY u(body, prev, hash, n)
      CROSS JOIN LATERAL jsonb_to_record(u.body::jsonb)
        AS b(id uuid, revision integer, type text, data jsonb, metadata jsonb, "timestamp" timestamptz)
      WHERE b.revision = p_expected + u.n
      ORDER BY u.n;
  GET DIAGNOSTICS inserted = ROW_COUNT;
  IF inserted <> k THEN RAISE EXCEPTION 'event body revisions do not follow stream revision %', p_expected; END IF;
  IF current_revision = -1 THEN
    INSERT INTO ${s}.streams (stream, revision, last_hash, snapshot, snapshot_revision)
      VALUES (p_stream, p_expected + k, head_hash, nullif(p_snapshot, '')::jsonb, CASE WHEN p_snapshot <> '' THEN p_expected + k END);
  ELSE
    UPDATE ${s}.streams SET revision = p_expected + k, last_hash = head_hash,
      snapshot = coalesce(nullif(p_snapshot, '')::jsonb, snapshot),
      snapshot_revision = CASE WHEN p_snapshot <> '' THEN p_expected + k ELSE snapshot_revision END
      WHERE stream = p_stream;
  END IF;
  PERFORM set_config('${placeSetting}', (place + k)::text, true);
  IF p_channel IS NOT NULL THEN PERFORM pg_notify(p_channel, (base + k - 1)::text); END IF;
  RETURN jsonb_build_array(jsonb_build_object('ok', true, 'revision', p_expected + k, 'first', base, 'last', base + k - 1));
END $fn$;
`;
}
