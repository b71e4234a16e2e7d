// Redemption codes: `tgc_<batch>_<secret>`, 120 random bits per code. A batch is minted once and
// stored only as the codes' SHA-256 hashes (like keys, a random secret needs no slow hash); the
// batch id in the code finds its batch without a lookup table. A code is redeemed once: its
// payment's id is derived from its hash, and the event store refuses a second event with that id.
import { randomBytes } from 'node:crypto';
import type { Decider } from '../ledger/decider.ts';
import type { EventDataByType, StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid } from '../ledger/errors.ts';
import { hashKey } from '../keys/index.ts';

const CODE_PATTERN = /^tgc_([a-z0-9]{10})_([A-Za-z0-9]{20})$/;
export const MAX_CODES_PER_BATCH = 1000;

export const newBatchId = (): string => randomBytes(16).toString('hex').slice(0, 10);

export function generateCode(batchId: string): string {
  return `tgc_${batchId}_${randomBytes(24).toString('base64url').replace(/[-_]/g, 'x').slice(0, 20)}`;
}

/** The batch a code belongs to, or null for a string that is not shaped like a code. */
export function parseCode(code: unknown): { batchId: string; hash: string } | null {
  const m = typeof code === 'string' ? CODE_PATTERN.exec(code) : null;
  return m ? { batchId: m[1], hash: hashKey(m[0]) } : null;
}

export type CodeBatch = EventDataByType['RedemptionCodesMinted'];
export interface CodeBatchState {
  batch: CodeBatch | null;
}

export const codeBatchDecider: Decider<CodeBatchState, { type: 'Mint'; batch: CodeBatch }, StreamEvents['codeBatch']> = {
  initialState: () => ({ batch: null }),
  decide(c, s) {
    if (s.batch) throw new DomainError('already_exists', `code batch ${c.batch.batchId} exists`);
    if (c.batch.hashes.length < 1 || c.batch.hashes.length > MAX_CODES_PER_BATCH)
      throw invalid(`count must be from 1 to ${MAX_CODES_PER_BATCH}`, { param: 'count' });
    return [{ type: 'RedemptionCodesMinted', data: c.batch }];
  },
  evolve: (s, e) => (e.type === 'RedemptionCodesMinted' ? { batch: e.data } : s),
};
