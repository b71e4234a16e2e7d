// One small interface over a real PostgreSQL pool and embedded PGlite, so every SQL statement
// in the project runs unchanged on both.
import pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';

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
  /** Calls back on NOTIFY for channel; returns an unlisten function. */
  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

// Positions and token counts are bigint columns but stay below 2^53 (positions: until 2^41
// transactions after the ledger began, see postgres-schema.ts).
pg.types.setTypeParser(20, (v: string) => Number(v));
pg.types.setTypeParser(1700, (v: string) => Number(v));

export function openPostgres(url: string, poolSize = 10): Database {
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  // An idle client's error (server restart) must not crash the process.
  pool.on('error', () => undefined);
  let listener: pg.Client | null = null;
  const handlers = new Map<string, Set<(p: string) => void>>();

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
      try {
        await client.query('BEGIN');
        const result = await fn({ query: async (t, p) => (await client.query(t, p as unknown[])).rows as never });
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
    async listen(channel, onNotify) {
      if (!listener) {
        listener = new pg.Client({ connectionString: url });
        listener.on('error', () => undefined);
        await listener.connect();
        listener.on('notification', (m) => handlers.get(m.channel)?.forEach((h) => h(m.payload ?? '')));
      }
      if (!handlers.has(channel)) {
        handlers.set(channel, new Set());
        await listener.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      }
      handlers.get(channel)!.add(onNotify);
      return async () => {
        handlers.get(channel)?.delete(onNotify);
      };
    },
    async close() {
      await listener?.end().catch(() => undefined);
      await pool.end();
    },
  };
}

export async function openPglite(dataDir?: string): Promise<Database> {
  // Loaded when used: a gateway on a PostgreSQL server never needs it.
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
      const unlisten = await db.listen(channel, onNotify);
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
export async function openDatabase(opts: { url?: string; dataDir?: string; poolSize?: number }): Promise<Database> {
  return opts.url ? openPostgres(opts.url, opts.poolSize) : openPglite(opts.dataDir);
}
