// Request bodies whose long strings are decoded a slice per turn (src/http/json-long-strings.ts,
// issue #30) parse to exactly what JSON.parse gives, key order included, and are refused exactly
// when JSON.parse refuses them. Slices here are a few bytes, so cuts fall on every kind of escape
// and in the middle of every UTF-8 sequence; chunks arrive at random sizes, as from a socket.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createRng } from '../src/upstream/seed.ts';
import { ShapeCheck, modelCallLimits } from '../src/http/body.ts';
import { NOTED_STRING_BYTES } from '../src/http/json-long-strings.ts';
import { refusedAsJson } from './support/json-refusal.ts';
import { parseInTurns } from '../src/http/json-in-turns.ts';

// A long string here: most slices of a few bytes fall inside it. Strings of NOTED_STRING_BYTES or
// more are all cut out, so short ones around that length are in every body too.
const LONG = 1024;

/** A seeded generator: the same cases on every run. */
const random = createRng;

// Pieces of a string's JSON text: plain, escaped, and raw UTF-8 of 2, 3 and 4 bytes.
const PIECES = ['abc', 'QUJD+/=', ' ', '\\n', '\\"', '\\\\', '\\/', '\\u00e9', '\\u4e2d', '\\ud83d\\ude00', '\\ud83d', 'é', '中', '😀', '\\t'];

function longStringText(next: () => number, minBytes: number): string {
  let s = '';
  while (Buffer.byteLength(s) < minBytes) s += PIECES[Math.floor(next() * PIECES.length)];
  return `"${s}"`;
}

/** The long strings' spans as the body's reader notes them, its chunks cut at random. */
function read(body: Buffer, next: () => number) {
  const shape = new ShapeCheck({ ...modelCallLimits(), values: 1_000_000 });
  for (let at = 0; at < body.length;) {
    const n = 1 + Math.floor(next() * 3000);
    shape.feed(body.subarray(at, at + n));
    at += n;
  }
  return shape;
}

async function parsedInSlices(text: string, next: () => number, bytesPerTurn: number): Promise<unknown> {
  const body = Buffer.from(text);
  // wholeParseBytes 0: these small bodies take the large bodies' way.
  return parseInTurns(body, body.length, read(body, next), { bytesPerTurn, wholeParseBytes: 0 });
}

test('bodies with long strings of escapes and multi-byte characters parse as JSON.parse parses them, cut anywhere', async () => {
  const next = random(30);
  for (let round = 0; round < 60; round++) {
    const long = () => longStringText(next, LONG + Math.floor(next() * 4000));
    const short = Array.from({ length: 30 }, () => longStringText(next, Math.floor(next() * NOTED_STRING_BYTES * 2)));
    const text =
      `{"short":[${short.join(',')}],${short[0]}:${short[1]},"model":"m","messages":[{"role":"user","content":${long()}},{"role":"user","content":[{"type":"text","text":${long()}}]}],` +
      `${long()}:{"nested":[${long()},"short",1,true,null]},"after":"kept","short\\u00e9":"\\u00e9"}`;
    const expected = JSON.parse(text) as unknown;
    const got = await parsedInSlices(text, next, 1 + Math.floor(next() * 40));
    assert.equal(got, expected);
    assert.is(JSON.stringify(got), JSON.stringify(expected), 'the keys are in the same order');
    assert.ok(read(Buffer.from(text), next).strings.count >= 6, 'the strings were cut out');
  }
});

/** A random JSON text of nested objects (repeated keys among them), arrays, numbers, literals and short strings. */
function randomJson(next: () => number, depth: number): string {
  const r = next();
  if (depth > 4 || r < 0.3) {
    const scalars = ['0', '-1.5e3', 'true', 'false', 'null', '""', '"a\\"b"', '"\\u00e9\\n"', '"中😀"', '123456789012'];
    return scalars[Math.floor(next() * scalars.length)];
  }
  const n = Math.floor(next() * 8);
  const items = Array.from({ length: n }, () => randomJson(next, depth + 1));
  if (r < 0.6) return `[${items.join(',')}]`;
  // Keys from a small set, so some repeat within an object (JSON.parse: first place, last value).
  return `{${items.map((v) => `"${['k', 'key', 'x\\\\y', 'é', 'z'][Math.floor(next() * 5)]}":${v}`).join(',')}}`;
}

test('nested structures with repeated keys and short strings parse as JSON.parse parses them, order included', async () => {
  const next = random(31);
  for (let round = 0; round < 200; round++) {
    const text = `{"a":[${Array.from({ length: 5 }, () => randomJson(next, 0)).join(',')}],"b":${randomJson(next, 0)}}`;
    const got = await parsedInSlices(text, next, 1 + Math.floor(next() * 60));
    assert.is(JSON.stringify(got), JSON.stringify(JSON.parse(text)));
  }
});

test('a key "__proto__" stays a key, wherever the cuts fall', async () => {
  const text = `{"a":[1,2,3],"__proto__":{"model":"injected"},"b":{"c":[4,5],"__proto__":[6]},"d":"${'y'.repeat(LONG)}"}`;
  for (let piece = 1; piece < 80; piece++) {
    const got = (await parsedInSlices(text, random(piece), piece)) as Record<string, Record<string, unknown>>;
    assert.is(Object.getPrototypeOf(got), Object.prototype);
    assert.is(Object.getPrototypeOf(got.b), Object.prototype);
    assert.is(JSON.stringify(got), JSON.stringify(JSON.parse(text)));
  }
});

test('invalid UTF-8 and a BOM inside long strings decode as the whole text decodes, wherever a slice ends', async () => {
  const odd = [
    [0xf0, 0x9f, 0x98, 0x80, 0x80, 0x80], // 😀 then two stray continuation bytes
    [0xc3, 0x80, 0x80, 0x80, 0x80],
    [0xe0, 0x80, 0x5c, 0x6e, 0x41], // an invalid lead byte right before an escape
    [0xf0, 0x80, 0x80, 0x5c, 0x6e],
    [0xef, 0xbb, 0xbf], // a BOM
    [0xed, 0xa0, 0x80], // an encoded surrogate
    [0xff, 0xfe, 0xc0, 0xaf],
  ];
  // And random runs of high bytes (valid or not) between ASCII letters.
  const next = random(32);
  for (let i = 0; i < 150; i++) odd.push(Array.from({ length: 1 + Math.floor(next() * 24) }, () => (next() < 0.2 ? 0x61 : 0x80 + Math.floor(next() * 128))));
  for (const bytes of odd) {
    const body = Buffer.concat([Buffer.from(`{"a":"${'x'.repeat(LONG)}`), Buffer.from(bytes), Buffer.from(`${'y'.repeat(40)}"}`)]);
    const expected = JSON.stringify(JSON.parse(body.toString('utf8')));
    for (let piece = 1; piece <= 9; piece++) {
      const got = await parseInTurns(body, body.length, read(body, random(piece)), { bytesPerTurn: piece, wholeParseBytes: 0 });
      assert.is(JSON.stringify(got), expected, `bytes ${Buffer.from(bytes).toString('hex')}, slices of ${piece}`);
    }
  }
});

test('a long key keeps its place; a repeated long key keeps its first place and its last value; "__proto__" stays a key', async () => {
  const key = 'k'.repeat(LONG * 2);
  const text = `{"a":1,"${key}":2,"__proto__":{"polluted":true},"b":3,"${key}":4}`;
  const got = (await parsedInSlices(text, random(1), 100)) as Record<string, unknown>;
  const expected = JSON.parse(text) as Record<string, unknown>;
  assert.equal(Object.keys(got), Object.keys(expected));
  assert.is(got[key], 4);
  assert.is(Object.getPrototypeOf(got), Object.prototype);
  assert.equal(Object.getOwnPropertyDescriptor(got, '__proto__')?.value, { polluted: true });
});

test('a caller string shaped like a placeholder is left as it is; a bare long string parses to itself', async () => {
  const text = `{"a":"\\u0000x#0","b":"${'y'.repeat(LONG)}"}`;
  assert.equal(await parsedInSlices(text, random(2), 64), JSON.parse(text));
  const bare = `"${'z'.repeat(LONG * 3)}"`;
  assert.is(await parsedInSlices(bare, random(3), 500), 'z'.repeat(LONG * 3));
});

test('a body JSON.parse refuses is refused: raw control characters, bad escapes, a broken skeleton', async () => {
  const filler = 'x'.repeat(LONG);
  const bad = [
    `{"a":"${filler}\u0001${filler}"}`,
    `{"a":"${filler}\\x${filler}"}`,
    `{"a":"${filler}\\u12G4${filler}"}`,
    `{"a":"${filler}\\`,
    `{"a":"${filler}" "b":1}`,
    `{"a":"${filler}",}`,
  ];
  for (const text of bad) {
    assert.throws(() => JSON.parse(text), undefined, `JSON.parse takes ${text.slice(-20)}`);
    try {
      await parsedInSlices(text, random(4), 7);
      assert.unreachable(`taken: ${text.slice(-20)}`);
    } catch (err) {
      assert.ok(refusedAsJson(err), `refused otherwise: ${text.slice(-20)} (${String(err)})`);
    }
  }
});

test.run();
