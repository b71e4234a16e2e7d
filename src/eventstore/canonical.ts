import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every depth: the same value always gives the same text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return '[' + value.map(canonicalJson).join(',') + ']';
  const entries = Object.keys(value as object)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => JSON.stringify(k) + ':' + canonicalJson((value as Record<string, unknown>)[k]));
  return '{' + entries.join(',') + '}';
}

export const GENESIS_HASH = '0'.repeat(64);

/** The hashed body of an event: everything except its position and the chain fields. */
export function eventBody(e: {
  id: string; stream: string; revision: number; type: string; timestamp: string;
  data: unknown; metadata: unknown;
}): string {
  return canonicalJson({
    id: e.id, stream: e.stream, revision: e.revision, type: e.type,
    timestamp: e.timestamp, data: e.data, metadata: e.metadata,
  });
}

export function chainHash(prevHash: string, body: string): string {
  return createHash('sha256').update(prevHash + body, 'utf8').digest('hex');
}
