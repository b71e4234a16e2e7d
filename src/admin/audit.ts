// Audit: every stream's hash chain, and every read model against a fresh rebuild.
import type { Ledger } from '../ledger/ledger.ts';
import { chainHash, eventBody, GENESIS_HASH } from '../eventstore/canonical.ts';
import { dropReadModels, dumpReadModels, replayInto } from '../../projections/rebuild.ts';

export interface ChainProblem {
  stream: string;
  revision: number;
  position: number;
  problem: string;
}
export interface ModelDifference {
  table: string;
  key: string;
  live: unknown;
  rebuilt: unknown;
}

/** Walks all events in global order, recomputing each stream's chain. */
export async function verifyHashChains(
  ledger: Ledger,
  onProgress?: (n: number) => void,
): Promise<{ events: number; streams: number; problems: ChainProblem[] }> {
  const last = new Map<string, { revision: number; hash: string }>();
  const problems: ChainProblem[] = [];
  let position = 0;
  let events = 0;
  for (;;) {
    const page = await ledger.events.readAll(position, 10_000);
    if (page.length === 0) break;
    for (const e of page) {
      const prev = last.get(e.stream) ?? { revision: -1, hash: GENESIS_HASH };
      if (e.revision !== prev.revision + 1)
        problems.push({ stream: e.stream, revision: e.revision, position: e.position, problem: `revision gap: expected ${prev.revision + 1}` });
      if (e.prevHash !== prev.hash)
        problems.push({ stream: e.stream, revision: e.revision, position: e.position, problem: 'prev_hash does not match the previous event' });
      const expected = chainHash(e.prevHash, eventBody(e));
      if (expected !== e.hash)
        problems.push({ stream: e.stream, revision: e.revision, position: e.position, problem: 'content does not match its hash (edited after append)' });
      last.set(e.stream, { revision: e.revision, hash: e.hash });
      events++;
    }
    position = page[page.length - 1].position;
    onProgress?.(events);
  }
  return { events, streams: last.size, problems };
}

/** Rebuilds into a scratch schema and lists every row that differs from the live read models. */
export async function compareWithRebuild(ledger: Ledger): Promise<ModelDifference[]> {
  await ledger.caughtUp();
  const scratch = `${ledger.rmSchema}_verify`;
  const position = await replayInto(ledger.readModels.db, ledger.events, scratch);
  await ledger.waitForPosition(position, 10_000);
  const live = await dumpReadModels(ledger.readModels.db, ledger.rmSchema);
  const rebuilt = await dumpReadModels(ledger.readModels.db, scratch);
  await dropReadModels(ledger.readModels.db, scratch);
  const diffs: ModelDifference[] = [];
  for (const table of Object.keys(rebuilt)) {
    if (table === 'checkpoint') continue;
    const index = (rows: unknown[]) => new Map(rows.map((r) => [String((r as { key: string }).key), r]));
    const a = index(live[table] ?? []);
    const b = index(rebuilt[table]);
    for (const key of new Set([...a.keys(), ...b.keys()])) {
      if (JSON.stringify(a.get(key)) !== JSON.stringify(b.get(key))) diffs.push({ table, key, live: a.get(key) ?? null, rebuilt: b.get(key) ?? null });
    }
  }
  return diffs;
}

export async function verifyLedger(ledger: Ledger) {
  const chains = await verifyHashChains(ledger);
  const readModels = await compareWithRebuild(ledger);
  return {
    ok: chains.problems.length === 0 && readModels.length === 0,
    events: chains.events,
    streams: chains.streams,
    chainProblems: chains.problems,
    readModelDifferences: readModels,
  };
}
