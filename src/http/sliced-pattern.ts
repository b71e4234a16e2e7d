// The request schemas' patterns over strings that can be megabytes long: an image inline as
// base64 is most of a 10 MB body, and one regular expression over it holds the event loop for
// ~15 ms (issue #30). Each pattern here is a short head then one character class to the end, so
// it is checked as the head (a regex on the first characters), then the rest in slices, with a
// turn of the event loop between slices. The verdict is the regex's (test/http-sliced-pattern).
import { nextTurn } from '../next-turn.ts';

type Tail = 'base64' | 'nonSpace';

/** Each known pattern as its alternatives: a head and the class every character after it is in. */
const SHAPES: Record<string, [head: RegExp, tail: Tail][]> = {
  '^(https?://\\S+|data:image/(png|jpeg|jpg|gif|webp);base64,[A-Za-z0-9+/]+={0,2})$': [
    [/^https?:\/\//, 'nonSpace'],
    [/^data:image\/(png|jpeg|jpg|gif|webp);base64,/, 'base64'],
  ],
  '^[A-Za-z0-9+/]+={0,2}$': [[/^/, 'base64']],
  '^https?://\\S+$': [[/^https?:\/\//, 'nonSpace']],
};
/** Every head is shorter than this. */
const HEAD_CHARS = 64;
/** Characters checked per turn: about 1.5 ms each. */
export const SLICE_CHARS = 1 << 20;

const CLASS: Record<Tail, RegExp> = { base64: /^[A-Za-z0-9+/]*$/, nonSpace: /^\S*$/ };

export const isSliceablePattern = (pattern: string): boolean => pattern in SHAPES;

/** Checks `s` against the pattern; each `yield` is a point where the caller may give the event loop a turn. */
function* check(pattern: string, s: string): Generator<void, boolean> {
  const head = s.slice(0, HEAD_CHARS);
  for (const [start, tail] of SHAPES[pattern]) {
    const m = start.exec(head);
    if (!m) continue;
    let end = s.length;
    // Base64's padding: at most two '=' at the very end.
    if (tail === 'base64') for (let pad = 0; pad < 2 && end > m[0].length && s.charCodeAt(end - 1) === 0x3d; pad++) end--;
    if (end <= m[0].length) return false; // the class must match at least once
    for (let i = m[0].length; i < end; i += SLICE_CHARS) {
      if (i > m[0].length) yield;
      if (!CLASS[tail].test(s.slice(i, Math.min(end, i + SLICE_CHARS)))) return false;
    }
    return true; // the heads are exclusive: no other alternative can match
  }
  return false;
}

/** The pattern's verdict in one go (for strings of a slice or so). */
export function matchesNow(pattern: string, s: string): boolean {
  const it = check(pattern, s);
  for (;;) {
    const step = it.next();
    if (step.done) return step.value;
  }
}

/** The pattern's verdict, one slice per turn of the event loop. */
export async function matchesSliced(pattern: string, s: string): Promise<boolean> {
  const it = check(pattern, s);
  for (;;) {
    const step = it.next();
    if (step.done) return step.value;
    await nextTurn();
  }
}
