// POST /admin/v1/verify and `tollgate verify`: from the last checkpoint on when one fits
// (verify-since.ts), otherwise, or when asked (`full`), the whole log and every read model against
// a rebuild (verify.ts), whose rebuild then becomes the copy the next verifications move forward.
// One verification at a time moves the checkpoint (a lease over every gateway of the ledger).
import type { Ledger } from '../ledger/ledger.ts';
import { captureChanges } from '../../projections/runner/change-capture.ts';
import { dropReadModels } from '../../projections/runner/rebuild.ts';
import type { TableDigest } from '../../projections/runner/compare.ts';
import { fullVerification, type KeptCopy, type VerifyProgress } from './verify.ts';
import { copyIsIntact, verifySince, type Timings } from './verify-since.ts';
import {
  ensureCheckpointTables,
  forgetCheckpoint,
  readCheckpoint,
  strayCopies,
  takeVerifyLease,
  writeCheckpoint,
  type VerifiedCheckpoint,
} from './verified-checkpoint.ts';

export type { VerifyProgress } from './verify.ts';

const digestsJson = (digests: Map<string, TableDigest>) =>
  Object.fromEntries([...digests].map(([table, d]) => [table, { rows: Number(d.rows), sum: String(d.sum) }]));

/** A checkpoint as the answer shows it. */
const shown = (cp: VerifiedCheckpoint) => ({
  position: cp.chainsPosition,
  readModelsPosition: cp.copyPosition,
  events: cp.events,
  verifiedAt: cp.verifiedAt,
  fullAt: cp.fullAt,
  digests: digestsJson(cp.digests),
});

export async function verifyLedger(ledger: Ledger, opts: { onProgress?: (p: VerifyProgress) => void; full?: boolean; timings?: Timings } = {}) {
  const db = ledger.readModels.db;
  const rm = ledger.rmSchema;
  const started = performance.now();
  await ensureCheckpointTables(db, rm);
  const lease = await takeVerifyLease(db, rm);
  try {
    const since = opts.full ? null : await readCheckpoint(db, rm);
    if (since && (await copyIsIntact(db, since))) {
      opts.timings?.add('start', performance.now() - started);
      const report = opts.onProgress;
      report?.({ phase: 'chains', done: 0, total: 0 });
      const r = await verifySince(ledger, since, {
        assertHeld: () => lease.assertHeld(),
        onProgress: (done, total) => report?.({ phase: 'chains', done, total }),
        timings: opts.timings,
      });
      report?.({ phase: 'chains', done: r.newEvents, total: r.newEvents });
      report?.({ phase: 'read models', done: 0, total: r.newEvents });
      report?.({ phase: 'read models', done: r.newEvents, total: r.newEvents });
      if (!r.recorded) await dropCopies(ledger, await forgetCheckpoint(db, rm), null);
      return {
        ok: r.recorded !== null,
        mode: 'since_checkpoint' as const,
        events: r.events,
        checkedEvents: r.newEvents,
        streams: r.streams,
        chainProblems: r.chainProblems,
        readModelDifferences: r.readModelDifferences,
        lotProblems: r.lotProblem === null ? [] : [r.lotProblem],
        since: { position: since.chainsPosition, verifiedAt: since.verifiedAt },
        checkpoint: r.recorded && shown(r.recorded),
      };
    }
    let kept: KeptCopy | null = null;
    const { reached, ...r } = await fullVerification(ledger, { onProgress: opts.onProgress, keep: (copy) => (kept = copy) });
    const copy = kept as KeptCopy | null;
    let recorded: VerifiedCheckpoint | null = null;
    if (r.ok && copy) {
      // From here on the copy's triggers note what the next verification must compare.
      await captureChanges(db, copy.schema);
      const now = new Date().toISOString();
      recorded = {
        chainsPosition: reached.position,
        events: r.events,
        lots: reached.lots,
        copy: copy.schema,
        copyPosition: copy.position,
        digests: copy.digests,
        verifiedAt: now,
        fullAt: now,
      };
      lease.assertHeld();
      await writeCheckpoint(db, rm, recorded, reached.heads, { allHeads: true });
    } else await forgetCheckpoint(db, rm);
    await dropCopies(ledger, recorded?.copy ?? null, recorded?.copy ?? null);
    return { ...r, mode: 'full' as const, checkedEvents: r.events, since: null, checkpoint: recorded && shown(recorded) };
  } finally {
    await lease.release().catch(() => undefined);
  }
}

/** Drops `copy` (a checkpoint forgotten) and every other kept copy but `keep`. */
async function dropCopies(ledger: Ledger, copy: string | null, keep: string | null): Promise<void> {
  const db = ledger.readModels.db;
  const names = new Set(await strayCopies(db, ledger.rmSchema, keep));
  if (copy && copy !== keep) names.add(copy);
  for (const name of names) await dropReadModels(db, name);
}
