// Seeding a month of charges fast, for the corrections bench: the events come from the real
// account decider (SimAccount), their hash chains from the event store's own hashing code
// (canonical.ts), and they go into the log as multi-row inserts of 5,000 rows, bypassing the
// append function's per-request work. The position origin is then moved past them, so the
// gateway's appends number after the seeded events exactly as after appended ones.
import type { Database } from '../src/eventstore/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { chainHash, eventBody } from '../src/eventstore/canonical.ts';
import { SNAPSHOT_VERSION } from '../src/ledger/command-handler.ts';
import { validateEvent } from '../src/ledger/event-catalogue.ts';
import { randomBytes } from 'node:crypto';
import { replayInto } from '../projections/runner/rebuild.ts';
import { catalogueSetup, SimAccount } from './ledger-traffic.ts';
import { mustAppendMany } from './ledger.ts';

/** Rows per insert statement. */
const ROWS_PER_INSERT = 5_000;
/** Charges generated between two inserts (split over the accounts as the window is). */
const CHARGES_PER_ROUND = 1_000;

interface Rows {
  position: number[];
  id: string[];
  stream: string[];
  revision: number[];
  type: string[];
  data: string[];
  metadata: string[];
  at: string[];
  prevHash: string[];
  hash: string[];
}
const noRows = (): Rows => ({ position: [], id: [], stream: [], revision: [], type: [], data: [], metadata: [], at: [], prevHash: [], hash: [] });

/**
 * Creates the event store in `schema` with the catalogue and the accounts, then `charges` chat
 * charges (a hold and its charge each), `bigShare` of them on accounts[0] and the rest spread over
 * the others. Answers the number of events in the log.
 */
export async function seedCharges(db: Database, schema: string, accounts: SimAccount[], charges: number, bigShare: number): Promise<number> {
  const store = await createPostgresEventStore(db, { schema, validate: validateEvent });
  await mustAppendMany(store, [...catalogueSetup(), ...accounts.flatMap((a) => a.setup(new Date()))]);
  await store.close();
  const s = `"${schema}"`;
  const heads = new Map<string, string>();
  for (const r of await db.query<{ stream: string; last_hash: string }>(`SELECT stream, last_hash FROM ${s}.streams WHERE stream = ANY($1::text[])`, [
    accounts.map((a) => a.stream),
  ]))
    heads.set(r.stream, r.last_hash);
  let [{ p: position }] = await db.query<{ p: string }>(`SELECT max(position) AS p FROM ${s}.events`);
  let next = Number(position);
  let rows = noRows();
  const flush = async () => {
    if (rows.position.length === 0) return;
    const r = rows;
    rows = noRows();
    await db.query(
      `INSERT INTO ${s}.events (position, id, stream, revision, type, data, metadata, created_at, prev_hash, hash)
       SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::integer[], $5::text[], $6::jsonb[], $7::jsonb[], $8::timestamptz[], $9::text[], $10::text[])`,
      [r.position, r.id, r.stream, r.revision, r.type, r.data, r.metadata, r.at, r.prevHash, r.hash],
    );
  };
  for (let done = 0; done < charges;) {
    const k = Math.min(CHARGES_PER_ROUND, charges - done);
    const timestamp = new Date().toISOString();
    for (const [account, pairs] of split(accounts, k, bigShare)) {
      const request = account.nextBulk(pairs);
      const first = request.expectedRevision as number;
      let prev = heads.get(account.stream)!;
      request.events.forEach((e, j) => {
        const revision = first + 1 + j;
        const hash = chainHash(prev, eventBody({ id: e.id!, stream: account.stream, revision, type: e.type, timestamp, data: e.data, metadata: e.metadata }));
        rows.position.push(++next);
        rows.id.push(e.id!);
        rows.stream.push(account.stream);
        rows.revision.push(revision);
        rows.type.push(e.type);
        rows.data.push(JSON.stringify(e.data));
        rows.metadata.push(JSON.stringify(e.metadata));
        rows.at.push(timestamp);
        rows.prevHash.push(prev);
        rows.hash.push(hash);
        prev = hash;
      });
      heads.set(account.stream, prev);
    }
    if (rows.position.length >= ROWS_PER_INSERT) await flush();
    done += k;
  }
  await flush();
  await db.transaction(async (tx) => {
    // Each account's head and its state as the snapshot, so its first command reads no tail.
    for (const a of accounts)
      await tx.query(`UPDATE ${s}.streams SET revision = $2, last_hash = $3, snapshot = $4::jsonb, snapshot_revision = $2 WHERE stream = $1`, [
        a.stream,
        a.revision,
        heads.get(a.stream),
        JSON.stringify({ v: SNAPSHOT_VERSION, s: a.state }),
      ]);
    // Positions of later appends count from here (see postgres-schema.ts), after the seeded ones.
    await tx.query(`UPDATE ${s}.position_origin SET xid = pg_current_xact_id()::text::bigint, position = $1`, [next + 1]);
  });
  [{ p: position }] = await db.query<{ p: string }>(`SELECT count(*) AS p FROM ${s}.events`);
  return Number(position);
}

/** `k` charges over the accounts: `bigShare` of them on the first, the rest spread evenly. */
function split(accounts: SimAccount[], k: number, bigShare: number): Array<[SimAccount, number]> {
  const big = Math.round(k * bigShare);
  const out: Array<[SimAccount, number]> = big > 0 ? [[accounts[0], big]] : [];
  const each = Math.floor((k - big) / (accounts.length - 1));
  let left = k - big;
  for (let i = 1; i < accounts.length && left > 0; i++) {
    const m = i === accounts.length - 1 ? left : Math.min(left, each);
    if (m > 0) out.push([accounts[i], m]);
    left -= m;
  }
  return out;
}

/**
 * A seeded log kept between runs of a bench (verify's): `charges` charges on 50 accounts, 40 % on
 * the first, with its read models built, unless the schema's read models are there already.
 * Answers whether it seeded.
 */
export async function keptSeededStore(
  db: Database,
  schema: string,
  charges: number,
  onPart: <T>(name: string, work: () => Promise<T>) => Promise<T>,
): Promise<boolean> {
  const [{ n }] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM information_schema.schemata WHERE schema_name = $1`, [`${schema}_rm`]);
  if (n > 0) return false;
  const tag = randomBytes(3).toString('hex');
  const accounts = Array.from({ length: 50 }, (_, i) => new SimAccount(tag, i, 'cx/gen-6-astra'));
  for (const a of accounts) a.requestsPerMinute = 1_000_000;
  const seeded = await onPart('seed', () => seedCharges(db, schema, accounts, charges, 0.4));
  console.log(`  ${seeded} events`);
  const store = await createPostgresEventStore(db, { schema, validate: validateEvent });
  await onPart('read models built', () => replayInto(db, store, `${schema}_rm`));
  await store.close();
  return true;
}
