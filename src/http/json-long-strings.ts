// JSON.parse of a request body whose long strings are decoded a slice per turn (issue #30). One
// JSON.parse of a 10 MB body, with its Buffer#toString before it, holds the event loop for 30-60 ms
// however the rest is sliced. The body's reader (body.ts) notes where each string longer than
// LONG_STRING_BYTES begins and ends as the bytes arrive. Each is cut out of the body, with a
// placeholder in its place, so JSON.parse sees a small skeleton. Its bytes are decoded about
// 1 MB a turn and put back in its placeholder's place.
// The parsed value is the same as JSON.parse of the whole text, and so is every refusal: an
// invalid escape or a raw control character inside a long string fails its slice's parse.
import { randomBytes } from 'node:crypto';

/** Strings (quotes included) at least this long are cut out of the skeleton. */
export const LONG_STRING_BYTES = 1024;
/** Bytes of long strings decoded per turn of the event loop. */
const BYTES_PER_TURN = 1 << 20;

/** A string's bytes in the body: `start` at its opening quote, `end` just after its closing one. */
export interface StringSpan {
  start: number;
  end: number;
}

export class InvalidJson extends Error {}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** JSON.parse of `body[0, size)`, with the strings at `spans` (in order, none overlapping) decoded in slices. */
export async function parseWithLongStrings(body: Buffer, size: number, spans: readonly StringSpan[], bytesPerTurn = BYTES_PER_TURN): Promise<unknown> {
  if (spans.length === 0) return parseText(body.toString('utf8', 0, size));
  // The placeholder holds a NUL and a nonce no caller can know, so no string of the body equals one.
  const tag = `\u0000${randomBytes(9).toString('base64url')}#`;
  const parts: Buffer[] = [];
  let from = 0;
  spans.forEach((span, i) => {
    parts.push(body.subarray(from, span.start), Buffer.from(JSON.stringify(tag + i)));
    from = span.end;
  });
  parts.push(body.subarray(from, size));
  const skeleton = parseText(Buffer.concat(parts).toString('utf8'));
  await nextTurn();
  const strings = await decodeStrings(body, spans, bytesPerTurn);
  return restore(skeleton, tag, strings);
}

function parseText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new InvalidJson('The request body is not valid JSON.');
  }
}

/** Each span's string, about `bytesPerTurn` bytes decoded per turn. */
async function decodeStrings(body: Buffer, spans: readonly StringSpan[], bytesPerTurn: number): Promise<string[]> {
  const strings: string[] = [];
  let budget = bytesPerTurn;
  for (const span of spans) {
    // Between the quotes: a slice never splits an escape or a UTF-8 sequence, so each parses alone.
    let decoded = '';
    for (let at = span.start + 1; at < span.end - 1;) {
      if (budget <= 0) {
        await nextTurn();
        budget = bytesPerTurn;
      }
      const cut = safeCut(body, at, Math.min(span.end - 1, at + budget), span.end - 1);
      decoded += parseText(`"${body.toString('utf8', at, cut)}"`) as string;
      budget -= cut - at;
      at = cut;
    }
    strings.push(decoded);
  }
  return strings;
}

/**
 * The end of a slice from `from` (at most `want`) that splits no escape (`\x` or `\uXXXX`) and no
 * UTF-8 sequence. Escapes are followed from `from`, which is never inside one, backslash to
 * backslash (a `\\` pair is one escape, so parity takes care of itself).
 */
export function safeCut(bytes: Buffer, from: number, want: number, end: number): number {
  if (want >= end) return end;
  let cut = want;
  for (let at = from; ;) {
    const slash = bytes.indexOf(0x5c, at);
    if (slash === -1 || slash >= cut) break;
    const after = slash + (bytes[slash + 1] === 0x75 ? 6 : 2);
    if (after > cut) {
      cut = slash;
      break;
    }
    at = after;
  }
  // A continuation byte (10xxxxxx) at the cut: step back to its sequence's first byte (at most 3).
  for (let back = 0; back < 3 && cut > from && (bytes[cut] & 0xc0) === 0x80; back++) cut--;
  // A slice must move on: the escape or character at its very start is taken whole.
  if (cut <= from) cut = Math.min(end, from + unitLength(bytes, from));
  return cut;
}

/** Bytes of the escape or UTF-8 character at `at`. */
function unitLength(bytes: Buffer, at: number): number {
  const b = bytes[at];
  if (b === 0x5c) return bytes[at + 1] === 0x75 ? 6 : 2;
  return b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
}

/** The skeleton with each placeholder, as a value or as an object's key, replaced by its string. */
function restore(skeleton: unknown, tag: string, strings: readonly string[]): unknown {
  const original = (s: string): string | undefined => (s.startsWith(tag) ? strings[Number(s.slice(tag.length))] : undefined);
  const put = (item: unknown, stack: unknown[]) => {
    if (typeof item === 'string') return original(item) ?? item;
    if (item !== null && typeof item === 'object') stack.push(item);
    return item;
  };
  if (typeof skeleton === 'string') return original(skeleton) ?? skeleton;
  const stack: unknown[] = [skeleton];
  while (stack.length > 0) {
    const v = stack.pop();
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) v[i] = put(v[i], stack);
      continue;
    }
    const o = v as Record<string, unknown>;
    const keys = Object.keys(o);
    for (const key of keys) o[key] = put(o[key], stack);
    if (keys.some((key) => original(key) !== undefined)) rekey(o, keys, original);
  }
  return skeleton;
}

/** Puts the long keys back in place, in the order JSON.parse gives (a repeated key: its first place, its last value). */
function rekey(o: Record<string, unknown>, keys: readonly string[], original: (s: string) => string | undefined): void {
  const entries = keys.map((key) => [original(key) ?? key, o[key]] as const);
  for (const key of keys) delete o[key];
  // Defined, not assigned: a key "__proto__" stays a key, as JSON.parse makes it.
  for (const [key, value] of entries) Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true });
}
