// JSON.parse of a large request body in turns of the event loop (issue #30). One JSON.parse of a
// 10 MB body, with its Buffer#toString before it, holds the event loop for 30-80 ms. The body's
// reader (body.ts) notes, as the bytes arrive, where each long string lies and where each large
// array or object lies with its items' boundaries. A body of a MB or more is then parsed in
// pieces of at most about 1 MB each, a turn's work at a time:
// - each long string is cut out, a placeholder in its place, and decoded apart
//   (json-long-strings.ts);
// - each large container's items (or members) are cut into runs of about RUN_BYTES, each run
//   parsed alone inside the container's own brackets, a placeholder in the run's place;
// - the pieces' values are put back in their placeholders' places, a run's items spliced into
//   their array and its members defined on their object in order.
// The value is the one JSON.parse of the whole text gives (key order, a repeated key's first
// place and last value, "__proto__" as an own key), and so is every refusal: each piece is what
// JSON.parse would take at that place, so the whole is valid exactly when every piece is.
import { randomBytes } from 'node:crypto';
import { nextTurn } from '../next-turn.ts';
import { decodeStrings, parseText, STRING_COST, StringSpans, Turns } from './json-long-strings.ts';

/** Smaller bodies are parsed whole: one JSON.parse of them takes a few ms. */
const WHOLE_PARSE_BYTES = 1 << 20;
/** Work per turn, in bytes. */
const BYTES_PER_TURN = 512 * 1024;
/** Containers at least this long (brackets included) are noted with their items' boundaries, and cut into runs. */
export const NOTED_CONTAINER_BYTES = 256 * 1024;
/** A run gathers items up to this many bytes (one item longer than that is a run of its own). */
const RUN_BYTES = 128 * 1024;

/** The large containers the reader noted: where each begins (its bracket) and ends (just after its closing one), and its top-level commas. */
export class ContainerSpans {
  readonly starts: number[] = [];
  readonly ends: number[] = [];
  readonly objects: boolean[] = [];
  readonly commas: number[][] = [];
  add(start: number, end: number, object: boolean, commas: number[]): void {
    this.starts.push(start);
    this.ends.push(end);
    this.objects.push(object);
    this.commas.push(commas);
  }
  get count(): number {
    return this.starts.length;
  }
}

export interface BodyMap {
  strings: StringSpans;
  containers: ContainerSpans;
}

export interface SliceOptions {
  bytesPerTurn: number;
  wholeParseBytes: number;
  runBytes: number;
}

/** What stands in a placeholder's place: a long string, a run of an array's items, or a run of an object's members. */
type Kind = 'string' | 'items' | 'members';

/** A part of the body parsed or decoded apart: `[start, end)` of the body, cut out of its parent piece. */
interface Cut {
  start: number;
  end: number;
  kind: Kind;
  /** The long string's index among the spans, or the run's among the pieces. */
  index: number;
}

/** A text JSON.parse takes in one go: the whole body (the root) or a run, its cuts replaced by placeholders. */
interface Piece {
  start: number;
  end: number;
  kind: 'root' | 'items' | 'members';
  cuts: Cut[];
}

/** JSON.parse of `body[0, size)`; a large body in pieces, a turn's work at a time. */
export async function parseInTurns(
  body: Buffer,
  size: number,
  map: BodyMap,
  { bytesPerTurn = BYTES_PER_TURN, wholeParseBytes = WHOLE_PARSE_BYTES, runBytes = RUN_BYTES }: Partial<SliceOptions> = {},
): Promise<unknown> {
  if (size < wholeParseBytes) return parseText(body.toString('utf8', 0, size));
  const turns = new Turns(bytesPerTurn);
  const pieces = piecesOf(size, map, runBytes);
  // The placeholder holds a NUL and a nonce no caller can know, so no string of the body equals one.
  const tag = `\u0000${randomBytes(6).toString('base64url')}#`;
  // As JSON text: `"\u0000<nonce>#`, then the index and a quote; ASCII, so its length is its bytes.
  const opening = JSON.stringify(tag).slice(0, -1);
  // Strings first, then the runs inner before outer (the reader notes a container when it closes), the root last:
  // each piece's placeholders stand for values already final, so each is restored alone, in its turn.
  const strings = map.strings.count === 0 ? [] : await decodeStrings(body, map.strings, turns);
  const values: unknown[] = new Array<unknown>(pieces.length);
  for (let k = 1; k <= pieces.length; k++) {
    const p = k % pieces.length;
    const text = textOf(body, pieces[p], opening);
    // A run alone of blanks would parse as `[]`: the reader refuses every empty item (`[1,,2]`, `[1,]`) first.
    values[p] = restore(parseText(text), tag, strings, values);
    if (turns.spend(2 * text.length + STRING_COST)) await nextTurn();
  }
  return values[0];
}

/**
 * The root and the runs, each with the cuts directly inside it; the root first. Cuts nest: a
 * string lies in a run or the root, a run in an item of a larger run, or in the root.
 */
function piecesOf(size: number, map: BodyMap, runBytes: number): Piece[] {
  const pieces: Piece[] = [{ start: 0, end: size, kind: 'root', cuts: [] }];
  const cuts: Cut[] = [];
  const { strings, containers } = map;
  for (let i = 0; i < strings.count; i++) cuts.push({ start: strings.starts[i], end: strings.ends[i], kind: 'string', index: i });
  for (let c = 0; c < containers.count; c++) {
    const kind = containers.objects[c] ? 'members' : 'items';
    // Item k spans from just after the bracket or comma before it to the comma or bracket after it.
    const bounds = [containers.starts[c], ...containers.commas[c], containers.ends[c] - 1];
    for (let first = 0; first < bounds.length - 1;) {
      let last = first + 1;
      while (last + 1 < bounds.length && bounds[last + 1] - bounds[first] <= runBytes) last++;
      pieces.push({ start: bounds[first] + 1, end: bounds[last], kind, cuts: [] });
      cuts.push({ start: bounds[first] + 1, end: bounds[last], kind, index: pieces.length - 1 });
      first = last;
    }
  }
  // Outer before inner: by start, the longer first, a run before a string it is made of alone.
  const isString = (c: Cut) => (c.kind === 'string' ? 1 : 0);
  cuts.sort((a, b) => a.start - b.start || b.end - a.end || isString(a) - isString(b));
  const open: Piece[] = [pieces[0]];
  for (const cut of cuts) {
    while (open.at(-1)!.end < cut.end) open.pop();
    const parent = open.at(-1)!;
    // The reader's spans nest, so cuts never overlap: asserted, as a text misplaced would be parsed wrong.
    if (cut.start < Math.max(parent.start, parent.cuts.at(-1)?.end ?? 0)) throw new Error('json-in-turns: two cuts overlap');
    parent.cuts.push(cut);
    if (cut.kind !== 'string') open.push(pieces[cut.index]);
  }
  return pieces;
}

/** A piece's text for JSON.parse: its bytes, each cut a placeholder, a run inside its container's brackets. */
function textOf(body: Buffer, piece: Piece, opening: string): string {
  const parts: string[] = [piece.kind === 'items' ? '[' : piece.kind === 'members' ? '{' : ''];
  let from = piece.start;
  for (const cut of piece.cuts) {
    // Cuts fall on quotes, commas and brackets: ASCII, so no UTF-8 sequence is split.
    parts.push(body.toString('utf8', from, cut.start));
    const id = `${opening}${cut.kind === 'string' ? 's' : 'p'}${cut.index}"`;
    parts.push(cut.kind === 'members' ? `${id}:0` : id);
    from = cut.end;
  }
  parts.push(body.toString('utf8', from, piece.end), piece.kind === 'items' ? ']' : piece.kind === 'members' ? '}' : '');
  return parts.join('');
}

/**
 * A piece's value with each placeholder (a long string as a value, a run of items as an array's
 * item, a run of members as an object's key) replaced by what it stands for. Those values are
 * final already, so only the piece's own values are walked.
 */
function restore(root: unknown, tag: string, strings: readonly string[], pieces: readonly unknown[]): unknown {
  const cut: Lookup = (s) => {
    if (!s.startsWith(tag)) return undefined;
    const index = Number(s.slice(tag.length + 1));
    if (s[tag.length] === 's') return { kind: 'string', value: strings[index] };
    return { kind: Array.isArray(pieces[index]) ? 'items' : 'members', value: pieces[index] };
  };
  const stack: unknown[] = [];
  const put = (item: unknown): unknown => {
    if (typeof item === 'string') {
      const found = cut(item);
      if (found?.kind === 'string') return found.value;
    } else if (item !== null && typeof item === 'object') stack.push(item);
    return item;
  };
  const top = put(root);
  while (stack.length > 0) {
    const v = stack.pop();
    if (Array.isArray(v)) restoreItems(v, cut, put);
    else restoreMembers(v as Record<string, unknown>, cut, put);
  }
  return top;
}

type Lookup = (s: string) => { kind: Kind; value: unknown } | undefined;

/** An array's items restored in place, each run's items spliced in where its placeholder stood. */
function restoreItems(v: unknown[], cut: Lookup, put: (item: unknown) => unknown): void {
  if (!v.some((item) => typeof item === 'string' && cut(item)?.kind === 'items')) {
    for (let i = 0; i < v.length; i++) v[i] = put(v[i]);
    return;
  }
  const items: unknown[] = [];
  for (const item of v) {
    const found = typeof item === 'string' ? cut(item) : undefined;
    if (found?.kind === 'items') for (const inner of found.value as unknown[]) items.push(inner);
    else items.push(put(item));
  }
  v.length = 0;
  for (const item of items) v.push(item);
}

/**
 * An object's members restored in place, each run's members where its placeholder key stood, in
 * the order JSON.parse gives (a repeated key: its first place, its last value). Keys are never cut
 * out as long strings (body.ts), so every other key is its own text.
 */
function restoreMembers(o: Record<string, unknown>, cut: Lookup, put: (item: unknown) => unknown): void {
  const keys = Object.keys(o);
  if (!keys.some((key) => cut(key) !== undefined)) {
    for (const key of keys) o[key] = put(o[key]);
    return;
  }
  const entries: (readonly [string, unknown])[] = [];
  for (const key of keys) {
    const found = cut(key);
    if (found?.kind === 'members') {
      const run = found.value as Record<string, unknown>;
      for (const inner of Object.keys(run)) entries.push([inner, run[inner]]);
    } else entries.push([key, put(o[key])]);
  }
  for (const key of keys) delete o[key];
  // Defined, not assigned: a key "__proto__" stays a key, as JSON.parse makes it.
  for (const [key, value] of entries) Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true });
}
