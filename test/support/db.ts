// Test databases: embedded PGlite in memory always; the real PostgreSQL when DATABASE_URL is set.
// Each test gets its own schema, so files can run side by side on one server.
import { randomBytes } from 'node:crypto';
import { openPglite, openPostgres, type Database, type Queryable } from '../../src/eventstore/db.ts';

export interface TestDatabase {
  label: string;
  db: Database;
  schema: string;
  cleanup(): Promise<void>;
}

export function uniqueSchema(prefix = 't'): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

export async function openTestPglite(): Promise<TestDatabase> {
  const db = await openPglite();
  return { label: 'pglite', db, schema: uniqueSchema(), cleanup: () => db.close() };
}

export async function openTestPostgres(url = process.env.DATABASE_URL!): Promise<TestDatabase> {
  const db = openPostgres(url, 20);
  const schema = uniqueSchema();
  return {
    label: 'postgres',
    db,
    schema,
    async cleanup() {
      await dropLedgerSchemas(db, schema);
      await db.close();
    },
  };
}

/** A test ledger's schemas: the log, the read models, a rebuild's, and verify's checkpoint with its kept copies. */
export async function dropLedgerSchemas(db: Queryable & { exec(sql: string): Promise<void> }, schema: string): Promise<void> {
  const verified = await db.query<{ name: string }>(`SELECT nspname AS name FROM pg_namespace WHERE starts_with(nspname, $1)`, [`${schema}_rm_verified`]);
  await db.exec([schema, `${schema}_rm`, `${schema}_rm_next`, ...verified.map((r) => r.name)].map((s) => `DROP SCHEMA IF EXISTS "${s}" CASCADE`).join('; '));
}

/** The databases every storage test runs on: PGlite always, PostgreSQL when DATABASE_URL is set. */
export function testDatabases(): Array<{ label: string; open: () => Promise<TestDatabase> }> {
  const list = [{ label: 'pglite', open: openTestPglite }];
  if (process.env.DATABASE_URL) list.push({ label: 'postgres', open: () => openTestPostgres() });
  return list;
}
