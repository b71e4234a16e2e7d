// Deterministic randomness: the simulated upstream must give the same output for the same input.
import { createHash } from 'node:crypto';

/** A 32-bit seed from the SHA-256 of the parts (joined with a separator that text cannot fake). */
export function seedFrom(...parts: string[]): number {
  return createHash('sha256').update(parts.join('\u0000')).digest().readUInt32LE(0);
}

// A seed needs determinism, not every character: a string longer than this stands in as its start,
// its length and its end, and past a budget strings stand in as their length alone, so a 10 MB
// prompt or inline image costs about what a 64 KB one does (issue #30).
const SEED_STRING_CHARS = 65_536;
const SEED_BUDGET_CHARS = 1_048_576;

/** `JSON.stringify(value)` (unchanged for small values), each long string cut to a stand-in: seed material in bounded work. */
export function seedJson(value: unknown): string {
  let budget = SEED_BUDGET_CHARS;
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v !== 'string') return v;
    const kept = budget <= 0 ? `\u0000${v.length}` : v.length > SEED_STRING_CHARS ? `${v.slice(0, 32_768)}\u0000${v.length}\u0000${v.slice(-32_768)}` : v;
    budget -= kept.length;
    return kept;
  });
}

/** mulberry32: tiny, fast, good enough for choosing words and colours. Returns [0, 1). */
export function createRng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Hex SHA-256 of the parts, for deterministic ids. */
export function digestHex(...parts: string[]): string {
  return createHash('sha256').update(parts.join('\u0000')).digest('hex');
}
