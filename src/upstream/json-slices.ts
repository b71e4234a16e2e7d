// JSON of values that hold a multi-MB string (an image inline as base64 is most of a 10 MB
// request): escaping such a string in one JSON.stringify holds the event loop for 10-100 ms
// (issue #30). Long strings are escaped a slice per turn and spliced into the JSON of the rest.
import { randomUUID } from 'node:crypto';
import { nextTurn } from '../next-turn.ts';

/** Strings longer than this are escaped in slices of this many characters. */
export const LONG_STRING_CHARS = 1 << 20;

/** JSON.stringify(s) without its quotes, a slice at a time; no cut falls between the halves of a surrogate pair. */
export async function* escapedSlices(s: string): AsyncGenerator<string> {
  for (let i = 0; i < s.length;) {
    let end = Math.min(s.length, i + LONG_STRING_CHARS);
    const last = s.charCodeAt(end - 1);
    if (end < s.length && last >= 0xd800 && last <= 0xdbff) end--;
    if (i > 0) await nextTurn();
    yield JSON.stringify(s.slice(i, end)).slice(1, -1);
    i = end;
  }
}

function hasLongString(value: unknown): boolean {
  const stack = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string' && v.length > LONG_STRING_CHARS) return true;
    if (v !== null && typeof v === 'object') for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push(child);
  }
  return false;
}

/** The UTF-8 bytes of JSON.stringify(value), its long strings escaped a slice per turn. */
export async function jsonBytes(value: unknown): Promise<Buffer> {
  if (!hasLongString(value)) return Buffer.from(JSON.stringify(value));
  // Each long string is first a placeholder no caller can write (a fresh UUID), then spliced in.
  const nonce = randomUUID();
  const long: string[] = [];
  const text = JSON.stringify(value, (_key, v: unknown) => (typeof v === 'string' && v.length > LONG_STRING_CHARS ? `${nonce}:${long.push(v) - 1}` : v));
  const parts: Buffer[] = [];
  const at = new RegExp(`"${nonce}:(\\d+)"`, 'g');
  let from = 0;
  for (const m of text.matchAll(at)) {
    parts.push(Buffer.from(`${text.slice(from, m.index)}"`));
    for await (const slice of escapedSlices(long[Number(m[1])])) parts.push(Buffer.from(slice));
    parts.push(Buffer.from('"'));
    from = m.index! + m[0].length;
  }
  parts.push(Buffer.from(text.slice(from)));
  return Buffer.concat(parts);
}
