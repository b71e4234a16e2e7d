// The PostgreSQL event store adapter; the same code runs on embedded PGlite.
import { phaseClock, phaseSince } from '../tracing/call-phases.ts';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Database } from './db.ts';
import { appendFunctionDdl, EVENTS_PER_TRANSACTION, eventTablesDdl, readableSql, readPageSql, type PositionOrigin } from './postgres-schema.ts';
import { eventBody } from './canonical.ts';
import { TimeSlicer } from '../next-turn.ts';
import { assertStreamName } from './stream-name.ts';
import { DuplicateEventError, LogNotReadableYet, WrongExpectedRevisionError } from './errors.ts';
import { guardSql, refusalsOf, streamsRead } from './append-guards.ts';
import { pollingSubscription } from './subscription.ts';
import { EVENT_COLUMNS, PROJECTED_COLUMNS, toStored, type EventRow } from './event-rows.ts';
import type {
  AppendRequest,
  AppendResult,
  EventHandler,
  EventStore,
  NewEvent,
  ProjectedEvent,
  Snapshot,
  StoredEvent,
  StreamRevision,
  SubscribeOptions,
  Subscription,
} from './port.ts';

export interface PostgresStoreOptions {
  /** PostgreSQL schema holding the events; lets several ledgers share one database. */
  schema?: string;
  /** Throws for an event that breaks the catalogue; runs before anything is sent. */
  validate?: (event: NewEvent) => void;
  /** Fallback poll for subscribers in case a notification is missed. */
  pollIntervalMs?: number;
  /** How long a read waits for older transactions to end before it answers LogNotReadableYet (default 5 s). */
  readWaitMs?: number;
}

const SEP = '\u001e';

/** A request checked and encoded, ready for append(). */
interface Prepared {
  index: number;
  stream: string;
  expected: number;
  snapshot: string;
  ids: string[];
  bodies: string[];
  durable: boolean;
  timestamp: string;
  notAfter?: number;
  unchanged?: StreamRevision[];
}

type AppendOutcome = Record<string, number | boolean | string>;

/** Consecutive runs of requests holding at most EVENTS_PER_TRANSACTION events each. */
function chunksOf(prepared: Prepared[]): Prepared[][] {
  const chunks: Prepared[][] = [];
  let events = EVENTS_PER_TRANSACTION;
  for (const p of prepared) {
    if (events + p.ids.length > EVENTS_PER_TRANSACTION) {
      chunks.push([]);
      events = 0;
    }
    chunks[chunks.length - 1].push(p);
    events += p.ids.length;
  }
  return chunks;
}

export async function createPostgresEventStore(db: Database, options: PostgresStoreOptions = {}): Promise<EventStore> {
  const schema = options.schema ?? 'tollgate';
  if (!/^[a-z_][a-z0-9_]{0,40}$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
  const s = `"${schema}"`;
  const lockKey = hashToInt(schema);
  // Concurrent first starts race on CREATE ... IF NOT EXISTS; an advisory lock orders them. The
  // second lock is the one appends of older versions took: none runs while positions change scheme.
  const origin = await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1), pg_advisory_xact_lock($2)', [lockKey + 1, lockKey]);
    for (const stmt of splitDdl(eventTablesDdl(schema))) await tx.query(stmt);
    const [row] = await tx.query<{ xid: string; position: string }>(`SELECT xid, position FROM ${s}.position_origin`);
    const found: PositionOrigin = { xid: Number(row.xid), position: Number(row.position) };
    for (const stmt of splitDdl(appendFunctionDdl(schema, found))) await tx.query(stmt);
    return found;
  });
  // Readers stay below every transaction still running (see postgres-schema.ts).
  const readable = readableSql(origin);
  const page = (columns: string) => readPageSql(schema, columns, readable);

  const appended = new EventEmitter();
  appended.setMaxListeners(0);
  /** Told only of other processes' commits (see onOthersCommit). */
  const others = new EventEmitter();
  others.setMaxListeners(0);
  const channel = `${schema}_events`;
  await db.listen(channel, (payload, fromThisProcess) => {
    const position = Number(payload);
    appended.emit('position', position);
    // This process's own NOTIFYs come back on LISTEN too; its caches heard of those events already.
    if (!fromThisProcess) others.emit('position', position);
  });

  // Other processes hear of appends by NOTIFY, sent after the commit (inside the append it would
  // order all commits under one lock) and coalesced: while one is on its way, later positions
  // wait and go as one. Embedded PGlite has no other process to tell. A lost one costs a poll.
  const othersMayListen = db.kind === 'postgres';
  let notifying = false;
  let toNotify = 0;
  /** Appends of this process under way (transactions sent, not yet answered). */
  let appending = 0;
  function notifyOthers(position: number): void {
    if (!othersMayListen) return;
    toNotify = Math.max(toNotify, position);
    if (notifying) return;
    notifying = true;
    const sent = toNotify;
    db.query('SELECT pg_notify($1, $2)', [channel, String(sent)])
      .catch(() => undefined)
      .finally(() => {
        notifying = false;
        if (toNotify > sent) notifyOthers(toNotify);
      });
  }

  /** Current revisions of the streams appended to with expectedRevision 'any', in one query. */
  async function resolveAny(requests: AppendRequest[]): Promise<Map<string, number>> {
    const names = [...new Set(requests.filter((r) => r.expectedRevision === 'any').map((r) => r.stream))];
    if (names.length === 0) return new Map();
    const rows = await db.query<{ stream: string; revision: number }>(`SELECT stream, revision FROM ${s}.streams WHERE stream = ANY($1::text[])`, [names]);
    return new Map(rows.map((r) => [r.stream, r.revision]));
  }

  async function appendMany(requests: AppendRequest[]): Promise<Array<AppendResult | Error>> {
    const results: Array<AppendResult | Error> = new Array(requests.length);
    const prepared: Prepared[] = [];
    const current = await resolveAny(requests);
    // A correction's batch holds thousands of events: checking and hashing them all in one go
    // would hold the event loop for tens of milliseconds, so live calls get turns in between.
    const slicer = new TimeSlicer();
    for (let i = 0; i < requests.length; i++) {
      const req = requests[i];
      try {
        assertStreamName(req.stream);
        if (req.events.length === 0) throw new Error('an append needs at least one event');
        if (req.events.length > EVENTS_PER_TRANSACTION) throw new Error(`an append holds at most ${EVENTS_PER_TRANSACTION} events`);
        const expected = req.expectedRevision === 'no_stream' ? -1 : req.expectedRevision === 'any' ? (current.get(req.stream) ?? -1) : req.expectedRevision;
        const timestamp = new Date().toISOString();
        const ids: string[] = [];
        const bodies: string[] = [];
        for (let j = 0; j < req.events.length; j++) {
          const e = req.events[j];
          options.validate?.(e);
          const id = e.id ?? randomUUID();
          // U+001E cannot occur in JSON text (control characters are escaped) or in a stream name.
          if (id.includes(SEP)) throw new Error('an event id cannot contain U+001E');
          ids.push(id);
          bodies.push(eventBody({ id, stream: req.stream, revision: expected + 1 + j, type: e.type, timestamp, data: e.data, metadata: e.metadata }));
          if (slicer.used()) await slicer.rest();
        }
        // '' is no snapshot (JSON text is never empty).
        const snapshot = req.snapshot === undefined ? '' : (JSON.stringify(req.snapshot) ?? '');
        prepared.push({
          index: i,
          stream: req.stream,
          expected,
          snapshot,
          ids,
          bodies,
          durable: req.durable !== false,
          timestamp,
          notAfter: req.notAfter,
          unchanged: req.unchanged,
        });
      } catch (err) {
        results[i] = err as Error;
      }
    }
    // A transaction holds at most EVENTS_PER_TRANSACTION events; larger batches go as several,
    // one after another (each request is atomic on its own, so a batch may be split between them).
    for (let chunk of chunksOf(prepared)) {
      appending++;
      // Alone, the append notifies inside its own transaction (no commit to keep order with,
      // one round trip saved); beside others, after its commit (see notifyOthers).
      const notifiesItself = othersMayListen && appending === 1 && chunk.length === 1;
      let rows: AppendOutcome[] | null;
      const sentAt = phaseClock();
      try {
        rows = await sendWithRetry(chunk, notifiesItself);
        phaseSince('store_sql', sentAt);
        // A guard failed when the chunk reached the database (a stream one of its decisions read
        // had moved, or its earliest deadline had passed): nothing was written. The requests it
        // concerns fail; the others go again without them.
        while (rows === null) {
          await refuseGuarded(chunk, results);
          chunk = chunk.filter((p) => results[p.index] === undefined);
          rows = chunk.length > 0 ? await sendWithRetry(chunk, notifiesItself) : [];
        }
      } finally {
        appending--;
      }
      rows.forEach((r, j) => {
        const p = chunk[j];
        if (r.ok) {
          results[p.index] = {
            stream: p.stream,
            revision: r.revision as number,
            firstPosition: r.first as number,
            lastPosition: r.last as number,
            timestamp: p.timestamp,
          };
          appended.emit('position', r.last as number);
          if (!notifiesItself) notifyOthers(r.last as number);
        } else if (r.duplicate) {
          results[p.index] = new DuplicateEventError(String(r.duplicate));
        } else {
          results[p.index] = new WrongExpectedRevisionError(p.stream, p.expected, r.actual as number);
        }
      });
    }
    return results;
  }

  /** After a guarded chunk wrote nothing: the requests its failure concerns fail (see append-guards.ts). */
  async function refuseGuarded(chunk: Prepared[], results: Array<AppendResult | Error>): Promise<void> {
    const read = streamsRead(chunk);
    const rows =
      read.length > 0
        ? await db.query<{ stream: string; revision: number }>(`SELECT stream, revision FROM ${s}.streams WHERE stream = ANY($1::text[])`, [read])
        : [];
    for (const [p, err] of refusalsOf(chunk, new Map(rows.map((r) => [r.stream, r.revision])))) results[p.index] = err;
  }

  /**
   * One call of append(): one transaction. Column-wise arguments, one element per request, then one
   * per event. null: the chunk's earliest deadline had passed by the database's clock, and the
   * append function was not called.
   */
  async function send(chunk: Prepared[], notifiesItself: boolean): Promise<AppendOutcome[] | null> {
    // One statement is one transaction: set_config(..., true) applies to its commit only. A
    // batch waits for the disk if any of its requests must. Named statements, parsed once per
    // connection (names stay under PostgreSQL's 63 bytes: a schema name has at most 41).
    const relaxed = chunk.every((p) => !p.durable) ? `, set_config('synchronous_commit', 'off', true)` : '';
    const guard = guardSql(chunk, 7, `${s}.streams`);
    const name = (base: string) => `${base}_${schema}${relaxed ? '_r' : ''}${guard.suffix}`;
    const guarded = (call: string) => (guard.condition ? `CASE WHEN ${guard.condition} THEN ${call} END` : call);
    if (chunk.length === 1) {
      const [p] = chunk;
      const rows = await db.queryPrepared<{ r: AppendOutcome[] | null }>(
        name('append1'),
        `SELECT ${guarded(`${s}.append_one($1, $2, $3, $4, $5, $6)`)} AS r${relaxed}`,
        [p.stream, p.expected, p.snapshot, p.ids.join(SEP), p.bodies.join(SEP), notifiesItself ? channel : null, ...guard.params],
      );
      return rows[0].r;
    }
    const rows = await db.queryPrepared<{ r: AppendOutcome[] | null }>(
      name('appendn'),
      `SELECT ${guarded(`${s}.append($1, $2::integer[], $3, $4::integer[], $5, $6)`)} AS r${relaxed}`,
      [
        chunk.map((p) => p.stream).join(SEP),
        chunk.map((p) => p.expected),
        chunk.map((p) => p.snapshot).join(SEP),
        chunk.map((p) => p.ids.length),
        chunk.flatMap((p) => p.ids).join(SEP),
        chunk.flatMap((p) => p.bodies).join(SEP),
        ...guard.params,
      ],
    );
    return rows[0].r;
  }

  // Appends run side by side, so two of them can collide where no stream lock orders them: the
  // same new event id sent to two streams at once (unique violation) or a deadlock between their
  // index entries. The loser's transaction wrote nothing; sent again, it sees the winner's result.
  async function sendWithRetry(chunk: Prepared[], notifiesItself: boolean): Promise<AppendOutcome[] | null> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await send(chunk, notifiesItself);
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (attempt >= 5 || (code !== '23505' && code !== '40P01')) throw err;
      }
    }
  }

  /** The last committed position: every event committed before the call is at or below it. */
  async function headPosition(): Promise<number> {
    const rows = await db.query<{ p: number | null }>(`SELECT max(position) AS p FROM ${s}.events`);
    return Number(rows[0].p ?? 0);
  }

  /** What is readable now: may stop short of what is committed (see readable). */
  async function readReadable(afterPosition: number, limit: number): Promise<StoredEvent[]> {
    const rows = await db.query<EventRow>(page(EVENT_COLUMNS), [afterPosition, limit]);
    return rows.map(toStored);
  }

  /**
   * A page that reaches everything committed before the call (or is full): a page cut short by an
   * older transaction still running is read again once it ends, backing off, within a bound.
   */
  async function readCommitted<E extends { position: number }>(
    read: (after: number, limit: number) => Promise<E[]>,
    afterPosition: number,
    limit: number,
  ): Promise<E[]> {
    const target = await headPosition();
    const until = Date.now() + (options.readWaitMs ?? 5000);
    for (let pause = 1; ; pause = Math.min(pause * 2, 50)) {
      const events = await read(afterPosition, limit);
      const reached = events.length ? events[events.length - 1].position : afterPosition;
      if (events.length >= limit || reached >= target) return events;
      if (Date.now() >= until) throw new LogNotReadableYet(target);
      await new Promise((r) => setTimeout(r, pause));
    }
  }

  const readAll = (afterPosition: number, limit: number) => readCommitted(readReadable, afterPosition, limit);

  return {
    kind: db.kind,
    async append(request) {
      const [result] = await appendMany([request]);
      if (result instanceof Error) throw result;
      return result;
    },
    appendMany,
    async readStream(stream, fromRevision = 0) {
      const rows = await db.query<EventRow>(`SELECT ${EVENT_COLUMNS} FROM ${s}.events WHERE stream = $1 AND revision >= $2 ORDER BY revision`, [
        stream,
        fromRevision,
      ]);
      return rows.map(toStored);
    },
    async findEvent(id) {
      const [row] = await db.query<EventRow>(`SELECT ${EVENT_COLUMNS} FROM ${s}.events WHERE id = $1`, [id]);
      return row ? toStored(row) : null;
    },
    readAll,
    readAllProjected: (afterPosition, limit) =>
      readCommitted(
        // The rows are the events already (position, a bigint, is parsed to a number by the
        // driver and by PGlite's normaliseRow): no second object per event.
        (after, n) => db.query<ProjectedEvent>(page(PROJECTED_COLUMNS), [after, n]),
        afterPosition,
        limit,
      ),
    ...(db.url ? { workerSource: { url: db.url, schema } } : {}),
    async readSnapshot(stream): Promise<Snapshot | null> {
      const rows = await db.query<{ snapshot: unknown; snapshot_revision: number | null }>(
        `SELECT snapshot, snapshot_revision FROM ${s}.streams WHERE stream = $1`,
        [stream],
      );
      const row = rows[0];
      return row && row.snapshot_revision !== null ? { revision: row.snapshot_revision, state: row.snapshot } : null;
    },
    headPosition,
    async readableHead() {
      const rows = await db.query<{ p: number | null }>(`SELECT max(position) AS p FROM ${s}.events WHERE ${readable}`);
      return Number(rows[0].p ?? 0);
    },
    async countAfter(afterPosition, limit) {
      const rows = await db.query<{ n: number }>(`SELECT count(*)::integer AS n FROM (SELECT 1 FROM ${s}.events WHERE position > $1 LIMIT $2) e`, [
        afterPosition,
        limit,
      ]);
      return Number(rows[0].n);
    },
    subscribe(afterPosition: number, handler: EventHandler, subscribeOptions?: SubscribeOptions): Subscription {
      return pollingSubscription({
        afterPosition,
        handler,
        // The subscription reads again by itself when what it was told of is not readable yet.
        readAll: readReadable,
        head: headPosition,
        notifier: appended,
        pollIntervalMs: options.pollIntervalMs ?? 1000,
        lingerMs: subscribeOptions?.lingerMs,
      });
    },
    ...(othersMayListen
      ? {
          onOthersCommit(listener: (position: number) => void) {
            others.on('position', listener);
            return () => others.off('position', listener);
          },
        }
      : {}),
    async close() {
      appended.removeAllListeners();
      others.removeAllListeners();
    },
  };
}

function hashToInt(text: string): number {
  let h = 0;
  for (const ch of text) h = (Math.imul(h, 31) + ch.charCodeAt(0)) | 0;
  return h;
}

// Splits DDL at top-level semicolons, keeping $fn$ bodies whole (prepared statements take one each).
function splitDdl(ddl: string): string[] {
  const out: string[] = [];
  let current = '';
  let inBody = false;
  for (const line of ddl.split('\n')) {
    if ((line.match(/\$fn\$/g) ?? []).length % 2 === 1) inBody = !inBody;
    current += line + '\n';
    if (!inBody && line.trimEnd().endsWith(';')) {
      out.push(current.trim());
      current = '';
    }
  }
  if (current.trim()) out.push(current.trim());
  return out.filter((q) => q.replace(/--.*$/gm, '').trim().length > 0);
}
