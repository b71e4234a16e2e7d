// Request bodies whose long strings are decoded a slice per turn (src/http/json-long-strings.ts,
// issue #30) parse to exactly what JSON.parse gives, key order included, and are refused exactly
// when JSON.parse refuses them. Slices here are a few bytes, so cuts fall on every kind of escape
// and in the middle of every UTF-8 sequence; chunks arrive at random sizes, as from a socket.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ShapeCheck, modelCallLimits } from '../src/http/body.ts';
import { InvalidJson, LONG_STRING_BYTES, parseWithLongStrings } from '../src/http/json-long-strings.ts';

/** A small seeded generator (mulberry32): the same cases on every run. */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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
  return shape.longStrings;
}

async function parsedInSlices(text: string, next: () => number, bytesPerTurn: number): Promise<unknown> {
  const body = Buffer.from(text);
  return parseWithLongStrings(body, body.length, read(body, next), bytesPerTurn);
}

test('bodies with long strings of escapes and multi-byte characters parse as JSON.parse parses them, cut anywhere', async () => {
  const next = random(30);
  for (let round = 0; round < 60; round++) {
    const long = () => longStringText(next, LONG_STRING_BYTES + Math.floor(next() * 4000));
    const text =
      `{"model":"m","messages":[{"role":"user","content":${long()}},{"role":"user","content":[{"type":"text","text":${long()}}]}],` +
      `${long()}:{"nested":[${long()},"short",1,true,null]},"after":"kept","short\\u00e9":"\\u00e9"}`;
    const expected = JSON.parse(text) as unknown;
    const got = await parsedInSlices(text, next, 1 + Math.floor(next() * 40));
    assert.equal(got, expected);
    assert.is(JSON.stringify(got), JSON.stringify(expected), 'the keys are in the same order');
    assert.ok(read(Buffer.from(text), next).length >= 4, 'the long strings were cut out');
  }
});

test('a long key keeps its place; a repeated long key keeps its first place and its last value; "__proto__" stays a key', async () => {
  const key = 'k'.repeat(LONG_STRING_BYTES * 2);
  const text = `{"a":1,"${key}":2,"__proto__":{"polluted":true},"b":3,"${key}":4}`;
  const got = (await parsedInSlices(text, random(1), 100)) as Record<string, unknown>;
  const expected = JSON.parse(text) as Record<string, unknown>;
  assert.equal(Object.keys(got), Object.keys(expected));
  assert.is(got[key], 4);
  assert.is(Object.getPrototypeOf(got), Object.prototype);
  assert.equal(Object.getOwnPropertyDescriptor(got, '__proto__')?.value, { polluted: true });
});

test('a caller string shaped like a placeholder is left as it is; a bare long string parses to itself', async () => {
  const text = `{"a":"\\u0000x#0","b":"${'y'.repeat(LONG_STRING_BYTES)}"}`;
  assert.equal(await parsedInSlices(text, random(2), 64), JSON.parse(text));
  const bare = `"${'z'.repeat(LONG_STRING_BYTES * 3)}"`;
  assert.is(await parsedInSlices(bare, random(3), 500), 'z'.repeat(LONG_STRING_BYTES * 3));
});

test('a body JSON.parse refuses is refused: raw control characters, bad escapes, a broken skeleton', async () => {
  const filler = 'x'.repeat(LONG_STRING_BYTES);
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
      assert.instance(err, InvalidJson, `refused otherwise: ${text.slice(-20)} (${String(err)})`);
    }
  }
});

test.run();
