// Large request bodies parsed in pieces (src/http/json-in-turns.ts, issue #30): large arrays and
// objects cut into runs of items, each parsed alone, give exactly what JSON.parse gives (values,
// key order, a repeated key's first place and last value, "__proto__" as an own key), and every
// text JSON.parse refuses is refused. The thresholds are a few bytes here, so every container is
// cut into runs, runs nest in runs, and the cuts fall next to every kind of token.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createRng } from '../src/upstream/seed.ts';
import { ShapeCheck, modelCallLimits } from '../src/http/body.ts';
import { parseInTurns } from '../src/http/json-in-turns.ts';
import { refusedAsJson } from './support/json-refusal.ts';

/** A seeded generator: the same cases on every run. */
const random = createRng;

const pick = <T>(next: () => number, xs: readonly T[]): T => xs[Math.floor(next() * xs.length)];
const blank = (next: () => number) => pick(next, ['', '', ' ', '\n  ', '\t']);

/** A random JSON text: nested arrays and objects (keys repeating, "__proto__" among them), scalars, short and long strings, blanks between tokens. */
function randomJson(next: () => number, depth: number): string {
  const r = next();
  if (depth > 3 || r < 0.25) {
    const long = `"${'x'.repeat(20 + Math.floor(next() * 30))}\\u00e9中"`;
    return pick(next, ['0', '-1.5e3', 'true', 'false', 'null', '""', '"a\\"b,]}"', '"\\u00e9\\n"', '"中😀"', '123456789012', long]);
  }
  const n = Math.floor(next() * 9);
  const items = Array.from({ length: n }, () => `${blank(next)}${randomJson(next, depth + 1)}${blank(next)}`);
  if (r < 0.6) return `[${items.join(',')}]`;
  const keys = ['k', 'key', 'x\\\\y', 'é', 'z', '__proto__', '1', `${'L'.repeat(24)}`];
  return `{${items.map((v) => `${blank(next)}"${pick(next, keys)}"${blank(next)}:${v}`).join(',')}}`;
}

/** The body's map as its reader notes it, chunks cut at random; strings of 24 bytes or more and containers of 16 or more are noted. */
function read(body: Buffer, next: () => number) {
  const shape = new ShapeCheck({ ...modelCallLimits(), values: 1_000_000, depth: 64 }, { stringBytes: 24, containerBytes: 16 });
  for (let at = 0; at < body.length;) {
    const n = 1 + Math.floor(next() * 200);
    shape.feed(body.subarray(at, at + n));
    at += n;
  }
  return shape;
}

async function parsed(text: string, next: () => number): Promise<unknown> {
  const body = Buffer.from(text);
  return parseInTurns(body, body.length, read(body, next), {
    wholeParseBytes: 0,
    bytesPerTurn: 1 + Math.floor(next() * 400),
    runBytes: 1 + Math.floor(next() * 60),
  });
}

/** JSON.parse of the body's text (a mutation may split a surrogate pair, which UTF-8 turns into U+FFFD). */
const parsedWhole = (text: string): unknown => JSON.parse(Buffer.from(text).toString('utf8'));

const same = (got: unknown, text: string, why: string) => {
  const expected = parsedWhole(text);
  assert.equal(got, expected, why);
  assert.is(JSON.stringify(got), JSON.stringify(expected), `${why}: the keys are in the same order`);
};

test('nested arrays and objects cut into runs parse as JSON.parse parses them, key order, repeated keys and "__proto__" included', async () => {
  const next = random(41);
  let runs = 0;
  for (let round = 0; round < 250; round++) {
    const text = `${blank(next)}{"a":[${Array.from({ length: 6 }, () => randomJson(next, 0)).join(',')}],"b":${randomJson(next, 0)},"__proto__":{"c":1}}${blank(next)}`;
    const body = Buffer.from(text);
    runs += read(body, next).containers.count;
    const got = (await parsed(text, next)) as object;
    same(got, text, text);
    assert.is(Object.getPrototypeOf(got), Object.prototype, 'no prototype was set');
  }
  assert.ok(runs > 1000, `containers were cut into runs (${runs})`);
});

test('a repeated key in two runs keeps its first place and its last value; "__proto__" in a run stays an own key', async () => {
  const filler = Array.from({ length: 40 }, (_, i) => `"f${i}":${i}`).join(',');
  const text = `{"dup":1,${filler},"__proto__":{"polluted":true},${filler},"dup":2,"2":"two","1":"one"}`;
  for (let seed = 0; seed < 50; seed++) {
    const got = (await parsed(text, random(seed))) as Record<string, unknown>;
    same(got, text, `seed ${seed}`);
    assert.is(got.dup, 2);
    assert.is(Object.keys(got)[2], 'dup', 'the first place (after the integer keys)');
    assert.is(Object.getPrototypeOf(got), Object.prototype);
    assert.equal(Object.getOwnPropertyDescriptor(got, '__proto__')?.value, { polluted: true });
  }
});

/** Texts near valid ones: one byte dropped, doubled or replaced by a token that breaks JSON somewhere. */
function mutated(text: string, next: () => number): string {
  const at = Math.floor(next() * text.length);
  const r = next();
  if (r < 0.3) return text.slice(0, at) + text.slice(at + 1);
  if (r < 0.5) return text.slice(0, at) + text[at] + text.slice(at);
  return text.slice(0, at) + pick(next, [',', ' ,', ']', '}', '[', '{', ':', '"', '1', ' ', ',,']) + text.slice(at + 1);
}

test('every text JSON.parse refuses is refused, and every one it takes is taken, wherever the runs are cut', async () => {
  const next = random(43);
  let refused = 0;
  for (let round = 0; round < 1500; round++) {
    const text = mutated(`[${Array.from({ length: 4 }, () => randomJson(next, 0)).join(',')}]`, next);
    let expected: unknown;
    try {
      expected = parsedWhole(text);
    } catch {
      refused++;
      try {
        await parsed(text, next);
        assert.unreachable(`taken: ${text}`);
      } catch (err) {
        assert.ok(refusedAsJson(err), `refused otherwise: ${text} (${String(err)})`);
      }
      continue;
    }
    assert.is(JSON.stringify(await parsed(text, next)), JSON.stringify(expected), text);
  }
  assert.ok(refused > 500, `most mutations break the text (${refused})`);
});

test('an empty item, a trailing comma and mismatched brackets at a run boundary are refused', async () => {
  const items = Array.from({ length: 30 }, (_, i) => `{"i":${i}}`);
  const bad = [
    `[${items.join(',')}, ,1]`,
    `[${items.join(',')},]`,
    `[${items.join(',')}}`,
    `{"a":[${items.join(',')}]]`,
    `[,${items.join(',')}]`,
    `{"a":1,,"b":2,${items.map((v, i) => `"k${i}":${v}`).join(',')}}`,
  ];
  for (const text of bad) {
    assert.throws(() => JSON.parse(text));
    for (let seed = 0; seed < 20; seed++) {
      try {
        await parsed(text, random(seed));
        assert.unreachable(`taken: ${text.slice(-30)}`);
      } catch (err) {
        assert.ok(refusedAsJson(err), String(err));
      }
    }
  }
});

test('a large body is cut at the module thresholds: 10,000 strings of 1,000 bytes in runs, as JSON.parse gives', async () => {
  const text = JSON.stringify({ model: 'm', metadata: { a: Array.from({ length: 10_000 }, (_, i) => `${i}`.padEnd(1000, 'y')), b: { c: [1, 2, 3] } } });
  const body = Buffer.from(text);
  const shape = new ShapeCheck(modelCallLimits());
  for (let at = 0; at < body.length; at += 65_536) shape.feed(body.subarray(at, at + 65_536));
  assert.ok(shape.containers.count >= 1, 'the large array is noted');
  same(await parseInTurns(body, body.length, shape), text, 'the body');
});

test('a repeated key, one copy written with escapes, keeps its first place and its last value, whatever its length', async () => {
  for (const text of [`{"x":1,"\\u0078":2,"x":3}`, `{"k":{"x":1,"\\u0078":2,"x":3,"y":[1,2,3,4,5,6,7,8,9]}}`, `{"\\u0031":"a","1":"b"}`]) {
    for (let seed = 0; seed < 20; seed++) same(await parsed(text, random(seed)), text, text);
  }
  // At the real thresholds: a key of 300 letters raw (302 bytes), escaped (1,802 bytes: a string that long as a value is cut out), raw again.
  const key = 'a'.repeat(300);
  const text = `{"pad":"${'p'.repeat(1_100_000)}","${key}":"first","${'\\u0061'.repeat(300)}":"second","${key}":"last"}`;
  const body = Buffer.from(text);
  const shape = new ShapeCheck(modelCallLimits());
  for (let at = 0; at < body.length; at += 65_536) shape.feed(body.subarray(at, at + 65_536));
  const got = (await parseInTurns(body, body.length, shape)) as Record<string, unknown>;
  assert.is(got[key], 'last');
  same(got, text, 'the long body');
});

test('a comma with no item before or after it is refused at once, and a key over 64 KB is refused', () => {
  for (const text of [`[${','.repeat(1_000_000)}]`, `{"a":[1,,${'2,'.repeat(100)}2]}`, `{,"a":1}`, `{"a":[${'2,'.repeat(100)} ]}`, `{"a":1,"b":2, }`]) {
    const shape = new ShapeCheck(modelCallLimits(), { stringBytes: 24, containerBytes: 16 });
    assert.throws(
      () => shape.feed(Buffer.from(text)),
      (err: Error & { code?: string }) => err.code === 'invalid_json',
      text.slice(0, 20),
    );
    assert.is(shape.containers.count, 0, 'nothing was noted');
  }
  const shape = new ShapeCheck(modelCallLimits());
  assert.throws(() => shape.feed(Buffer.from(`{"${'k'.repeat(65_536)}":1}`)), /key in the request body is longer than 65536 bytes/);
  new ShapeCheck(modelCallLimits()).feed(Buffer.from(`{"${'k'.repeat(65_000)}":"${'v'.repeat(100_000)}"}`));
});

test('a number longer than 1,000 characters or 65,536 blanks in a row is refused by the reader, before any parse', () => {
  const refused = (text: string, what: RegExp) => {
    const shape = new ShapeCheck(modelCallLimits());
    const body = Buffer.from(text);
    try {
      for (let at = 0; at < body.length; at += 65_536) shape.feed(body.subarray(at, at + 65_536));
      assert.unreachable(`taken: ${text.slice(0, 20)}`);
    } catch (err) {
      const e = err as { status?: number; code?: string; message: string };
      assert.is(e.status, 400);
      assert.is(e.code, 'invalid_json');
      assert.match(e.message, what);
    }
  };
  refused(`{"a":[1,${'9'.repeat(10_000_000)}]}`, /number or literal .* longer than 1000/);
  refused(`{"a":[1,0.${'5'.repeat(1_000)}]}`, /number or literal/);
  refused(`{"a":[1,${' '.repeat(10_000_000)}2]}`, /more than 65536 blank characters/);
  refused(`{"a":${'\n\t '.repeat(30_000)}1}`, /blank characters/);
  // What real bodies hold is taken: long numbers of JSON.stringify, pretty-printed nesting, blanks between many tokens.
  const taken = new ShapeCheck(modelCallLimits());
  taken.feed(
    Buffer.from(
      JSON.stringify({ a: [Number.MAX_VALUE, -Number.MIN_VALUE, 0.1 + 0.2, ...Array.from({ length: 9000 }, () => true)], b: { c: { d: null } } }, null, 64),
    ),
  );
  taken.feed(Buffer.from(`${' '.repeat(65_536)}`));
});

test.run();
