// The long strings of a large request body, decoded about 1 MB a turn (issue #30). The body's reader
// (body.ts) notes where each string of NOTED_STRING_BYTES or more begins and ends as the bytes
// arrive; the parse (json-in-turns.ts) puts a placeholder in each one's place and asks for its
// value here. Each is decoded as the whole text's decoding and JSON.parse would decode it, and
// refused as they would refuse it: an invalid escape or a raw control character fails its slice.
import { StringDecoder } from 'node:string_decoder';
import { nextTurn } from '../next-turn.ts';

/** Strings (quotes included) at least this long are noted, and cut out of a large body's skeleton. */
export const NOTED_STRING_BYTES = 1024;
/** What each string costs beyond its bytes, counted against a turn's budget of bytes. */
export const STRING_COST = 256;

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

/** A budget of work per turn; `spend` says when it is used up (the caller waits for the next turn then). */
export class Turns {
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

export function parseText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new InvalidJson('The request body is not valid JSON.');
  }
}

/** Each span's string, decoded in slices within the turns' budget. */
export async function decodeStrings(body: Buffer, spans: StringSpans, turns: Turns): Promise<string[]> {
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
