import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted at every depth: the same value always gives the same text. Built
 * in one pass into one string (it runs for every event appended, on the hot path); the text is
 * byte for byte what the filter/sort/map/join form gave, which the stored hash chains depend on.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i ? ',' : '') + (canonicalJson(value[i]) ?? '');
    return out + ']';
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  let out = '{';
  let first = true;
  for (const k of keys) {
    const v = record[k];
    if (v === undefined) continue;
    out += (first ? '' : ',') + JSON.stringify(k) + ':' + canonicalJson(v);
    first = false;
  }
  return out + '}';
}

export const GENESIS_HASH = '0'.repeat(64);

/** The hashed body of an event: everything except its position and the chain fields. */
export function eventBody(e: { id: string; stream: string; revision: number; type: string; timestamp: string; data: unknown; metadata: unknown }): string {
  return canonicalJson({
    id: e.id,
    stream: e.stream,
    revision: e.revision,
    type: e.type,
    timestamp: e.timestamp,
    data: e.data,
    metadata: e.metadata,
  });
}

export function chainHash(prevHash: string, body: string): string {
  return createHash('sha256')
    .update(prevHash + body, 'utf8')
    .digest('hex');
}
