// JSON.parse of a large request body in turns of the event loop (issue #30). One JSON.parse of a
// 10 MB body, with its Buffer#toString before it, holds the event loop for 30-80 ms however the
// rest is sliced. The body's reader (body.ts) notes where each string of NOTED_STRING_BYTES or
// more begins and ends as the bytes arrive. In a body of a MB or more, each is cut out, a
// placeholder in its place, so JSON.parse sees a skeleton; the strings are decoded about 1 MB a
// turn (each one counts as STRING_COST bytes more) and put back in their placeholders' places.
// Shorter strings stay in the skeleton (cutting out 100-byte strings costs more than it saves),
// so a body of 10 MB in strings under 1 KB is still one JSON.parse of 10 MB, in a turn of its own.
// The parsed value is the same as JSON.parse of the whole text, and so is every refusal: an
// invalid escape or a raw control character inside a string fails its slice's parse.
import { randomBytes } from 'node:crypto';
import { StringDecoder } from 'node:string_decoder';
import { nextTurn } from '../next-turn.ts';

/** Strings (quotes included) at least this long are noted, and cut out of a large body's skeleton. */
export const NOTED_STRING_BYTES = 1024;
/** Smaller bodies are parsed whole: one JSON.parse of them takes a few ms. */
const WHOLE_PARSE_BYTES = 1 << 20;
/** Work per turn, in bytes; each string counts as STRING_COST bytes more, for its own overheads. */
const BYTES_PER_TURN = 1 << 20;
const STRING_COST = 256;

/** Where the noted strings lie in the body: `starts[i]` at an opening quote, `ends[i]` just after its closing one. */
export class StringSpans {
  readonly starts: number[] = [];
  readonly ends: number[] = [];
  add(start: number, end: number): void {
    this.starts.push(start);
    this.ends.push(end);
  }
  get count(): number {
    return this.starts.length;
  }
}

export class InvalidJson extends Error {}

/** A character JSON does not allow raw inside a string (U+0000 to U+001F). */
// eslint-disable-next-line no-control-regex -- matching control characters is this pattern's job
const CONTROL = /[\u0000-\u001f]/;

export interface SliceOptions {
  bytesPerTurn: number;
  wholeParseBytes: number;
}

/** A budget of work per turn; `spend` says when it is used up (the caller waits for the next turn then). */
class Turns {
  private left: number;
  constructor(private readonly perTurn: number) {
    this.left = perTurn;
  }
  spend(n: number): boolean {
    this.left -= n;
    if (this.left > 0) return false;
    this.left = this.perTurn;
    return true;
  }
  get room(): number {
    return Math.max(1, this.left);
  }
}

/** JSON.parse of `body[0, size)`; a large body in turns, the strings at `spans` (in order, none overlapping) decoded in slices. */
export async function parseInTurns(
  body: Buffer,
  size: number,
  spans: StringSpans,
  { bytesPerTurn = BYTES_PER_TURN, wholeParseBytes = WHOLE_PARSE_BYTES }: Partial<SliceOptions> = {},
): Promise<unknown> {
  if (size < wholeParseBytes) return parseText(body.toString('utf8', 0, size));
  const turns = new Turns(bytesPerTurn);
  // The placeholder holds a NUL and a nonce no caller can know, so no string of the body equals one.
  const tag = `\u0000${randomBytes(6).toString('base64url')}#`;
  // Decoding the skeleton's text, parsing it and putting the strings back take a turn each.
  const text = (spans.count === 0 ? body.subarray(0, size) : await skeletonOf(body, size, spans, tag, turns)).toString('utf8');
  await nextTurn();
  const skeleton = parseText(text);
  if (spans.count === 0) return skeleton;
  await nextTurn();
  const strings = await decodeStrings(body, spans, turns);
  await nextTurn();
  return restore(skeleton, tag, strings);
}

function parseText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new InvalidJson('The request body is not valid JSON.');
  }
}

/** The body's text with each noted string replaced by its placeholder, copied in turns. */
async function skeletonOf(body: Buffer, size: number, spans: StringSpans, tag: string, turns: Turns): Promise<Buffer> {
  // `"\u0000<nonce>#` then the index and a quote: ASCII, so its length is its bytes.
  const open = JSON.stringify(tag).slice(0, -1);
  let length = size;
  for (let i = 0; i < spans.count; i++) length += open.length + String(i).length + 1 - (spans.ends[i] - spans.starts[i]);
  const out = Buffer.allocUnsafe(length);
  let at = 0;
  let from = 0;
  for (let i = 0; i < spans.count; i++) {
    const copied = body.copy(out, at, from, spans.starts[i]);
    at += copied;
    at += out.write(`${open}${i}"`, at, 'latin1');
    from = spans.ends[i];
    if (turns.spend(copied + STRING_COST / 4)) await nextTurn();
  }
  at += body.copy(out, at, from, size);
  return out.subarray(0, at);
}

/** Each span's string, decoded in slices within the turns' budget. */
async function decodeStrings(body: Buffer, spans: StringSpans, turns: Turns): Promise<string[]> {
  const strings: string[] = new Array<string>(spans.count);
  // One streaming decoder per string: a UTF-8 sequence cut by a slice (valid or not) is decoded as
  // the whole text's decoding would. Escapes are ASCII, so the bytes it holds back are never one.
  // (StringDecoder, not TextDecoder: a streaming TextDecoder makes two-byte strings of ASCII, twice the memory.)
  const utf8 = new StringDecoder('utf8');
  for (let i = 0; i < spans.count; i++) {
    const end = spans.ends[i] - 1;
    let decoded = '';
    for (let at = spans.starts[i] + 1; at < end;) {
      const cut = escapeSafeCut(body, at, Math.min(end, at + turns.room), end);
      const raw = utf8.write(body.subarray(at, cut));
      // Without escapes or raw control characters (base64, most prose) the text is the value: no parse, no copies.
      decoded += body.subarray(at, cut).includes(0x5c) || CONTROL.test(raw) ? (parseText(`"${raw}"`) as string) : raw;
      if (turns.spend(cut - at)) await nextTurn();
      at = cut;
    }
    // A sequence left incomplete at the closing quote: U+FFFD, as the whole text gives.
    strings[i] = decoded + utf8.end();
    if (turns.spend(STRING_COST)) await nextTurn();
  }
  return strings;
}

/**
 * The end of a slice from `from` (at most `want`) that splits no escape (`\x` or `\uXXXX`), so each
 * slice parses alone. Escapes are followed from `from`, which is never inside one, backslash to
 * backslash (a `\\` pair is one escape, so parity takes care of itself).
 */
export function escapeSafeCut(bytes: Buffer, from: number, want: number, end: number): number {
  if (want >= end) return end;
  // Searched within the slice only: a search of the whole body for a backslash it lacks reads to its end.
  const slice = bytes.subarray(0, want);
  for (let at = from; ;) {
    const slash = slice.indexOf(0x5c, at);
    if (slash === -1 || slash >= want) return want;
    const after = slash + (bytes[slash + 1] === 0x75 ? 6 : 2);
    if (after > want) {
      // A slice must move on: an escape at its very start is taken whole.
      return slash > from ? slash : Math.min(end, after);
    }
    at = after;
  }
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
