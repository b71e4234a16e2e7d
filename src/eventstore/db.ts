// One small interface over a real PostgreSQL pool and embedded PGlite, so every SQL statement
// in the project runs unchanged on both.
import pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { DatabaseDeadlinePassed } from './errors.ts';
import { compileWasmOnce } from './wasm-once.ts';

export interface Queryable {
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
}

export interface Database extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** How another thread or process connects to the same database (null: embedded, this process only). */
  readonly url: string | null;
  /**
   * The same as query, as a named prepared statement (parsed once per connection): for the
   * statements every call sends. One name, one text.
   */
  queryPrepared<R = Record<string, unknown>>(name: string, text: string, params: unknown[]): Promise<R[]>;
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Runs several statements separated by semicolons (no parameters). */
  exec(sql: string): Promise<void>;
  /**
   * Calls back on NOTIFY for channel, saying whether one of this process's own connections sent it;
   * returns an unlisten function.
   */
  listen(channel: string, onNotify: (payload: string, fromThisProcess: boolean) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

// Positions and token counts are bigint columns but stay below 2^53 (positions: until 2^41
// transactions after the ledger began, see postgres-schema.ts).
pg.types.setTypeParser(20, (v: string) => Number(v));
pg.types.setTypeParser(1700, (v: string) => Number(v));

/**
 * Bounds on every wait for PostgreSQL (all milliseconds; 0 turns one off). Without them a stalled
 * link holds a call, a pooled connection and /readyz for as long as the stall lasts.
 */
export interface PgTimeouts {
  /** PG_CONNECT_TIMEOUT_MS: to open a connection, and to wait for a free one in the pool. */
  connectMs: number;
  /** PG_STATEMENT_TIMEOUT_MS: one statement, on the server (statement_timeout) and, for a link that answers nothing, on this side. */
  statementMs: number;
  /** PG_IDLE_IN_TRANSACTION_TIMEOUT_MS: the server ends a session whose transaction waits on its client this long. */
  idleInTransactionMs: number;
  /** PG_KEEPALIVE_MS: TCP keepalive, after this long without traffic (0: off). */
  keepAliveMs: number;
}

/**
 * One statement read through the indexes its order or range names: tables loaded in bulk have no
 * column statistics (autovacuum off, a scratch schema), and the planner then took a range of keys
 * or positions for a large part of the table and scanned (and sorted) all of it for every page.
 */
export function queryByIndex<T>(db: Database, text: string, params?: unknown[]): Promise<T[]> {
  return db.transaction(async (tx) => {
    await tx.query(
      `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true), set_config('max_parallel_workers_per_gather', '0', true)`,
    );
    return tx.query<T>(text, params);
  });
}

/** The defaults for a serving process; bench and test tools that open a pool without any wait as long as they need. */
export const DEFAULT_PG_TIMEOUTS: PgTimeouts = { connectMs: 3000, statementMs: 5000, idleInTransactionMs: 10_000, keepAliveMs: 10_000 };

/**
 * For statements on tables nobody uses yet (a rebuild's index builds and table rewrites): the
 * serving bounds less the statement's, which such a statement over millions of rows outlasts.
 */
export const UNBOUNDED_STATEMENTS: PgTimeouts = { ...DEFAULT_PG_TIMEOUTS, statementMs: 0 };

/** A lost or refused connection, a timeout: the database is out of reach for now, nothing about the request. */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  if (err instanceof DatabaseDeadlinePassed) return true;
  const code = typeof e.code === 'string' ? e.code : '';
  // Class 08: connection exception; 57P01-03: the server shut down or cannot connect now;
  // 57014: a statement cancelled by statement_timeout; 25P03: idle-in-transaction timeout;
  // 25006: a read-only server (a standby being promoted); 53300: too many connections.
  if (/^08|^57P0[123]$|^57014$|^25P03$|^25006$|^53300$/.test(code)) return true;
  if (/^(ECONNRESET|ECONNREFUSED|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN)$/.test(code)) return true;
  const message = typeof e.message === 'string' ? e.message : '';
  return (
    /Connection terminated|connection timeout|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Client was closed|not queryable|Connection ended/i.test(
      message,
    ) ||
    ('cause' in e && e.cause !== err && isDatabaseUnavailable(e.cause))
  );
}

/**
 * For a session that holds a lease (an advisory lock it may wait for as long as it takes): a
 * bounded connect, and keepalive so a peer that vanished is noticed. No statement timeout.
 */
export const sessionBounds: pg.ClientConfig = {
  connectionTimeoutMillis: DEFAULT_PG_TIMEOUTS.connectMs,
  keepAlive: true,
  keepAliveInitialDelayMillis: DEFAULT_PG_TIMEOUTS.keepAliveMs,
};

/**
 * The connection string and server settings of every pooled session: the URL's own `options`,
 * then JIT off. Every statement here is short and on an index, but the planner guesses a stream's
 * rows from the whole log (tens of thousands where there are none) and, over jit_above_cost, spent
 * 17 ms compiling a read that then took 0.04 ms (the month-close stream of a 10M-event log, read
 * by every finance report).
 */
function withSessionOptions(url: string): { connectionString: string; options?: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { connectionString: url }; // a key=value string: as it is
  }
  // pg lets the URL's options win over the ones given beside it: both are moved into one.
  const own = parsed.searchParams.get('options');
  parsed.searchParams.delete('options');
  return { connectionString: parsed.href, options: [own, '-c jit=off'].filter(Boolean).join(' ') };
}

/** pg's options for the bounds above. */
function boundedOptions(t: PgTimeouts): pg.PoolConfig {
  return {
    connectionTimeoutMillis: t.connectMs || undefined,
    statement_timeout: t.statementMs || undefined,
    // The server's own timeout answers first with a clear error; this one ends a wait on a link that answers nothing.
    query_timeout: t.statementMs ? t.statementMs + 1000 : undefined,
    idle_in_transaction_session_timeout: t.idleInTransactionMs || undefined,
    keepAlive: t.keepAliveMs > 0,
    keepAliveInitialDelayMillis: t.keepAliveMs || undefined,
  };
}

export function openPostgres(url: string, poolSize = 10, timeouts?: PgTimeouts): Database {
  const bounds = timeouts ? boundedOptions(timeouts) : {};
  const pool = new pg.Pool({ ...withSessionOptions(url), max: poolSize, ...bounds });
  // An idle client's error (server restart) must not crash the process; the pool drops it.
  pool.on('error', () => undefined);
  // The server processes of this pool's connections: a NOTIFY sent by one of them is this process's own.
  const ownBackends = new Set<number>();
  const backendOf = (client: pg.PoolClient) => (client as unknown as { processID?: number }).processID;
  pool.on('connect', (client) => {
    const pid = backendOf(client);
    if (pid !== undefined) ownBackends.add(pid);
  });
  pool.on('remove', (client) => {
    const pid = backendOf(client);
    if (pid !== undefined) ownBackends.delete(pid);
  });
  let listener: pg.Client | null = null;
  let connecting: Promise<pg.Client> | null = null;
  let closed = false;
  const handlers = new Map<string, Set<(p: string, fromThisProcess: boolean) => void>>();

  /** The LISTEN connection, opened again (with every channel) after it was lost; NOTIFY is a hint, polling covers the gap. */
  function listenerClient(): Promise<pg.Client> {
    if (listener) return Promise.resolve(listener);
    connecting ??= (async () => {
      const client = new pg.Client({ connectionString: url, ...bounds });
      const lost = () => {
        if (listener === client) listener = null;
        client.end().catch(() => undefined);
        if (!closed && handlers.size > 0) setTimeout(() => void listenerClient().catch(() => undefined), 1000).unref();
      };
      client.on('error', lost);
      client.on('end', lost);
      try {
        await client.connect();
        client.on('notification', (m) => handlers.get(m.channel)?.forEach((h) => h(m.payload ?? '', ownBackends.has(m.processId))));
        for (const channel of handlers.keys()) await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        listener = client;
        return client;
      } catch (err) {
        client.removeListener('end', lost);
        client.end().catch(() => undefined);
        throw err;
      } finally {
        connecting = null;
      }
    })();
    return connecting;
  }

  return {
    kind: 'postgres',
    url,
    async query(text, params) {
      return (await pool.query(text, params as unknown[])).rows;
    },
    async queryPrepared(name, text, params) {
      return (await pool.query({ name, text, values: params })).rows;
    },
    async exec(sql) {
      await pool.query(sql);
    },
    async transaction(fn) {
      const client = await pool.connect();
      // Checked out, a client has no listener of the pool's: a connection lost now (a failover,
      // a cut) would be an unhandled 'error' event, which ends the process. The failing query
      // reports the loss to the transaction; this only keeps the event from being unhandled.
      let broken: Error | undefined;
      const onError = (err: Error) => {
        broken = err;
      };
      client.on('error', onError);
      try {
        await client.query('BEGIN');
        const result = await fn({ query: async (t, p) => (await client.query(t, p as unknown[])).rows as never });
        await client.query('COMMIT');
        return result;
      } catch (err) {
        if (!broken && !isDatabaseUnavailable(err)) await client.query('ROLLBACK').catch((e: Error) => (broken = e));
        else broken ??= err as Error;
        throw err;
      } finally {
        client.removeListener('error', onError);
        // A connection that failed is discarded, not handed to the next transaction mid-way.
        client.release(broken);
      }
    },
    async listen(channel, onNotify) {
      if (!handlers.has(channel)) {
        handlers.set(channel, new Set());
        const client = await listenerClient();
        await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      }
      handlers.get(channel)!.add(onNotify);
      return async () => {
        handlers.get(channel)?.delete(onNotify);
      };
    },
    async close() {
      closed = true;
      await listener?.end().catch(() => undefined);
      await pool.end();
    },
  };
}

export async function openPglite(dataDir?: string): Promise<Database> {
  // Loaded when used: a gateway on a PostgreSQL server never needs it.
  compileWasmOnce();
  const { PGlite: Embedded } = await import('@electric-sql/pglite');
  const db: PGlite = await Embedded.create(dataDir ? { dataDir } : {});
  const rowsOf = (r: { rows: unknown[] }) => r.rows.map(normaliseRow) as never[];
  return {
    kind: 'pglite',
    url: null,
    async query(text, params) {
      return rowsOf(await db.query(text, params as unknown[]));
    },
    // Embedded: no network round trip to save, and PGlite keeps no named statements.
    async queryPrepared(_name, text, params) {
      return rowsOf(await db.query(text, params));
    },
    async exec(sql) {
      await db.exec(sql);
    },
    async transaction(fn) {
      return db.transaction((tx) => fn({ query: async (t, p) => rowsOf(await tx.query(t, p as unknown[])) }));
    },
    async listen(channel, onNotify) {
      // Embedded: no other process shares this database.
      const unlisten = await db.listen(channel, (payload) => onNotify(payload, true));
      return async () => {
        await unlisten();
      };
    },
    async close() {
      await db.close();
    },
  };
}

// PGlite hands int8 back as bigint; the pg pool gives numbers. Make both numbers.
function normaliseRow(row: unknown): unknown {
  const r = row as Record<string, unknown>;
  for (const k in r) if (typeof r[k] === 'bigint') r[k] = Number(r[k]);
  return r;
}

/** DATABASE_URL selects a real PostgreSQL; otherwise embedded PGlite in dataDir (memory if none). */
export async function openDatabase(opts: { url?: string; dataDir?: string; poolSize?: number; timeouts?: PgTimeouts }): Promise<Database> {
  return opts.url ? openPostgres(opts.url, opts.poolSize, opts.timeouts) : openPglite(opts.dataDir);
}
