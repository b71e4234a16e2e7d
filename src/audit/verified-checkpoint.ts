// Where the last verification that passed left off, so the next one reads only what came after
// it (verify-since.ts): the position its chains reached with each stream's chain head, the lot
// book's state there, and the kept copy of the read models it compared (a schema of its own, at
// its own position) with a digest of each of its tables. Kept beside the read models, in
// `<read models>_verified`, with a lease so that one verification at a time moves it.
import { createHash, randomBytes } from 'node:crypto';
import v8 from 'node:v8';
import type { Database, Queryable } from '../eventstore/db.ts';
import type { LotFoldState } from '../books/index.ts';
import { projectionDdl } from '../../projections/runner/ddl.ts';
import { allReadModels } from '../../projections/runner/registry.ts';
import type { TableDigest } from '../../projections/runner/compare.ts';
import type { ChainHeads } from './chain-check.ts';

/** A change of what the record holds, or of how the copy is kept, makes older records unusable. */
const RECORD_FORMAT = 1;

export interface VerifiedCheckpoint {
  /** The last event whose chain (and lot booking) was checked. */
  chainsPosition: number;
  /** Events checked since the log began. */
  events: number;
  lots: LotFoldState;
  /** The kept copy of the read models: its schema and the position it was compared at. */
  copy: string;
  copyPosition: number;
  digests: Map<string, TableDigest>;
  verifiedAt: string;
  /** When the full verification the chain of checkpoints began with ran. */
  fullAt: string;
}

const schemaOf = (readModels: string) => `${readModels}_verified`;
const t = (readModels: string, table: string) => `"${schemaOf(readModels)}"."${table}"`;

/** A fresh name for a kept copy (dropped with the record's schema family: same prefix). */
export const copyName = (readModels: string) => `${schemaOf(readModels)}_${randomBytes(4).toString('hex')}`;

/**
 * What the copy's tables are made of: the read models' DDL and this record's format. A release
 * that changes a read model's columns starts again from a full verification.
 */
function fingerprint(): string {
  return createHash('sha256')
    .update(`${RECORD_FORMAT}\n${projectionDdl('x', allReadModels()).join('\n')}`)
    .digest('hex');
}

/** The live read models' schema's identity: a rebuild swaps in a new schema, and the copy no longer follows it. */
async function liveIdentity(db: Queryable, readModels: string): Promise<string> {
  const [row] = await db.query<{ oid: string }>(`SELECT oid::text AS oid FROM pg_namespace WHERE nspname = $1`, [readModels]);
  return row?.oid ?? '';
}

export async function ensureCheckpointTables(db: Database, readModels: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [schemaOf(readModels)]);
    await tx.query(`CREATE SCHEMA IF NOT EXISTS "${schemaOf(readModels)}"`);
    await tx.query(`CREATE TABLE IF NOT EXISTS ${t(readModels, 'record')} (name text PRIMARY KEY, chains_position bigint NOT NULL, events bigint NOT NULL,
      lots bytea NOT NULL, copy text NOT NULL, copy_position bigint NOT NULL, digests jsonb NOT NULL, fingerprint text NOT NULL, live_identity text NOT NULL,
      verified_at timestamptz NOT NULL, full_at timestamptz NOT NULL)`);
    await tx.query(`CREATE TABLE IF NOT EXISTS ${t(readModels, 'heads')} (stream text PRIMARY KEY, revision integer NOT NULL, hash text NOT NULL)`);
    await tx.query(`CREATE TABLE IF NOT EXISTS ${t(readModels, 'lease')} (name text PRIMARY KEY, holder text NOT NULL, until timestamptz NOT NULL)`);
  });
}

/** How long a lease lasts unless renewed (a verification that died frees it after this). */
const LEASE_MS = 60_000;
const LEASE_POLL_MS = 250;

export interface VerifyLease {
  /** Throws when the lease lapsed meanwhile (this process stalled): nothing may be recorded then. */
  assertHeld(): void;
  release(): Promise<void>;
}

/**
 * Waits until no other verification holds the lease, and takes it; it is renewed in the
 * background until released.
 */
export async function takeVerifyLease(db: Database, readModels: string): Promise<VerifyLease> {
  const holder = randomBytes(8).toString('hex');
  const take = async () =>
    (
      await db.query(
        `INSERT INTO ${t(readModels, 'lease')} VALUES ('main', $1, now() + $2 * interval '1 millisecond')
          ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
          WHERE ${t(readModels, 'lease')}.until < now() OR ${t(readModels, 'lease')}.holder = excluded.holder RETURNING holder`,
        [holder, LEASE_MS],
      )
    ).length === 1;
  while (!(await take())) await new Promise((r) => setTimeout(r, LEASE_POLL_MS));
  let lost = false;
  let renewing: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    renewing = take().then(
      (held) => void (lost ||= !held),
      () => undefined, // a failed renewal is tried again; a lapse shows on the next one
    );
  }, LEASE_MS / 4);
  timer.unref();
  return {
    assertHeld() {
      if (lost) throw new Error('the verification lease lapsed (this process stalled for over a minute): verify again');
    },
    async release() {
      clearInterval(timer);
      await renewing;
      await db.query(`DELETE FROM ${t(readModels, 'lease')} WHERE holder = $1`, [holder]);
    },
  };
}

/** The last checkpoint, when it still fits this release and these read models (null: the next verification is a full one). */
export async function readCheckpoint(db: Database, readModels: string): Promise<VerifiedCheckpoint | null> {
  const [row] = await db.query<{
    chains_position: number;
    events: number;
    lots: Uint8Array;
    copy: string;
    copy_position: number;
    digests: Record<string, { rows: string; sum: string }>;
    fingerprint: string;
    live_identity: string;
    verified_at: Date | string;
    full_at: Date | string;
  }>(`SELECT * FROM ${t(readModels, 'record')} WHERE name = 'main'`);
  if (!row || row.fingerprint !== fingerprint() || row.live_identity !== (await liveIdentity(db, readModels))) return null;
  return {
    chainsPosition: Number(row.chains_position),
    events: Number(row.events),
    lots: v8.deserialize(Buffer.from(row.lots)) as LotFoldState,
    copy: row.copy,
    copyPosition: Number(row.copy_position),
    digests: new Map(Object.entries(row.digests).map(([table, d]) => [table, { rows: BigInt(d.rows), sum: BigInt(d.sum) }])),
    verifiedAt: new Date(row.verified_at).toISOString(),
    fullAt: new Date(row.full_at).toISOString(),
  };
}

/** Every stream's chain head at the checkpoint. */
export async function readHeads(db: Database, readModels: string): Promise<ChainHeads> {
  const rows = await db.query<{ stream: string; revision: number; hash: string }>(`SELECT stream, revision, hash FROM ${t(readModels, 'heads')}`);
  return rows.map((r) => [r.stream, { revision: Number(r.revision), hash: r.hash }]);
}

/** Heads written per statement. */
const HEADS_PER_STATEMENT = 5_000;

/**
 * Records a checkpoint, with the heads of the streams that moved (all of them after a full
 * verification: `allHeads`), in the caller's transaction; `then` runs in it too (the copy's
 * notes are forgotten with the record they led to, never one without the other).
 */
export async function writeCheckpoint(
  db: Database,
  readModels: string,
  cp: VerifiedCheckpoint,
  heads: ChainHeads,
  opts: { allHeads: boolean; then?: (tx: Queryable) => Promise<void> },
): Promise<void> {
  const identity = await liveIdentity(db, readModels);
  const digests = Object.fromEntries([...cp.digests].map(([table, d]) => [table, { rows: String(d.rows), sum: String(d.sum) }]));
  await db.transaction(async (tx) => {
    if (opts.allHeads) await tx.query(`TRUNCATE ${t(readModels, 'heads')}`);
    for (let i = 0; i < heads.length; i += HEADS_PER_STATEMENT) {
      const chunk = heads.slice(i, i + HEADS_PER_STATEMENT);
      await tx.query(
        `INSERT INTO ${t(readModels, 'heads')} SELECT * FROM unnest($1::text[], $2::integer[], $3::text[])
          ON CONFLICT (stream) DO UPDATE SET revision = excluded.revision, hash = excluded.hash`,
        [chunk.map(([s]) => s), chunk.map(([, h]) => h.revision), chunk.map(([, h]) => h.hash)],
      );
    }
    await tx.query(
      `INSERT INTO ${t(readModels, 'record')} VALUES ('main', $1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
        ON CONFLICT (name) DO UPDATE SET chains_position = excluded.chains_position, events = excluded.events, lots = excluded.lots, copy = excluded.copy,
          copy_position = excluded.copy_position, digests = excluded.digests, fingerprint = excluded.fingerprint, live_identity = excluded.live_identity,
          verified_at = excluded.verified_at, full_at = excluded.full_at`,
      [
        cp.chainsPosition,
        cp.events,
        v8.serialize(cp.lots),
        cp.copy,
        cp.copyPosition,
        JSON.stringify(digests),
        fingerprint(),
        identity,
        cp.verifiedAt,
        cp.fullAt,
      ],
    );
    await opts.then?.(tx);
  });
}

/** Forgets the checkpoint (a verification failed: the next one is full). Returns the copy it named, for dropping. */
export async function forgetCheckpoint(db: Database, readModels: string): Promise<string | null> {
  const rows = await db.query<{ copy: string }>(`DELETE FROM ${t(readModels, 'record')} WHERE name = 'main' RETURNING copy`);
  await db.query(`TRUNCATE ${t(readModels, 'heads')}`);
  return rows[0]?.copy ?? null;
}

/** The kept copies no record names (an older checkpoint's, or a failed adoption's): to drop. */
export async function strayCopies(db: Queryable, readModels: string, keep: string | null): Promise<string[]> {
  const rows = await db.query<{ name: string }>(`SELECT nspname AS name FROM pg_namespace WHERE starts_with(nspname, $1)`, [`${schemaOf(readModels)}_`]);
  return rows.map((r) => r.name).filter((n) => n !== keep);
}
