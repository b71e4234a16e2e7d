// Deterministic randomness: the simulated upstream must give the same output for the same input.
import { createHash } from 'node:crypto';

/** A 32-bit seed from the SHA-256 of the parts (joined with a separator that text cannot fake). */
export function seedFrom(...parts: string[]): number {
  return createHash('sha256').update(parts.join('\u0000')).digest().readUInt32LE(0);
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
