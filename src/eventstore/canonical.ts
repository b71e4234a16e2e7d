import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted at every depth: the same value always gives the same text, byte for
 * byte the text the stored hash chains were computed from. It runs for every event appended and
 * every event verify checks, so plain data (what events hold) takes the fast way: a copy with its
 * keys inserted in sorted order, written by one JSON.stringify. Anything the copy could render
 * differently (a key JSON.stringify would move or drop, a value it would render otherwise) takes
 * the slow way, which builds the text key by key.
 */
export function canonicalJson(value: unknown): string {
  // A toJSON that some library put on every object or array would be called by JSON.stringify.
  if ('toJSON' in Object.prototype || 'toJSON' in Array.prototype) return slowCanonicalJson(value);
  try {
    const copy = sortedCopy(value);
    if (copy !== NOT_PLAIN) return JSON.stringify(copy);
  } catch (err) {
    // Nested deeper than the fast way's stack allows: the slow way goes as deep as it always did.
    if (!(err instanceof RangeError)) throw err;
  }
  return slowCanonicalJson(value);
}

const NOT_PLAIN: unique symbol = Symbol('not plain data');

/**
 * The value with every object's keys inserted in sorted order, or NOT_PLAIN when JSON.stringify
 * of such a copy could differ from the canonical text: an integer-like key (engines order those
 * numerically), a "__proto__" key (assigning it sets the prototype), an object that is not a plain
 * one (a toJSON method, a Date), a function, symbol or bigint, or undefined in an array.
 */
function sortedCopy(value: unknown): unknown {
  if (value === null) return null;
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
      return value;
    case 'object':
      break;
    default:
      return NOT_PLAIN;
  }
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) {
      const v = value[i];
      if (v === undefined) return NOT_PLAIN;
      const c = sortedCopy(v);
      if (c === NOT_PLAIN) return NOT_PLAIN;
      out[i] = c;
    }
    return out;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return NOT_PLAIN;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    const first = k.charCodeAt(0);
    if ((first >= 48 && first <= 57) || k === '__proto__') return NOT_PLAIN; // '0'-'9'
    const v = record[k];
    if (v === undefined) continue;
    const c = sortedCopy(v);
    if (c === NOT_PLAIN) return NOT_PLAIN;
    out[k] = c;
  }
  return out;
}

/** The canonical text built key by key: what any value, plain or not, has always been given. */
function slowCanonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i ? ',' : '') + (slowCanonicalJson(value[i]) ?? '');
    return out + ']';
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  let out = '{';
  let first = true;
  for (const k of keys) {
    const v = record[k];
    if (v === undefined) continue;
    out += (first ? '' : ',') + JSON.stringify(k) + ':' + slowCanonicalJson(v);
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
