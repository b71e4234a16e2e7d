// The canonical JSON that event hashes are computed over: one text per value, keys sorted at every
// depth, and byte for byte the text the hash chains already stored were computed from.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { canonicalJson, chainHash, eventBody, GENESIS_HASH } from '../src/eventstore/canonical.ts';

/** The first definition, kept as the reference the stored chains were built with. */
function reference(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return '[' + value.map(reference).join(',') + ']';
  const entries = Object.keys(value as object)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => JSON.stringify(k) + ':' + reference((value as Record<string, unknown>)[k]));
  return '{' + entries.join(',') + '}';
}

/** Deterministic pseudo-random values of every JSON kind, nested. */
function* values(seed: number, count: number): Generator<unknown> {
  let x = seed;
  const rnd = () => (x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const keys = ['a', 'B', 'b', 'zeta', 'Ämter', '日本', '', 'k"q', 'line\nbreak', '10', '9', 'z\u0000'];
  const make = (depth: number): unknown => {
    const r = rnd();
    if (depth > 3 || r < 0.3) return [null, true, false, 0, -1.5, 1e21, 123456789012, 'text', 'ü\u2028"\\', ''][Math.floor(rnd() * 10)];
    if (r < 0.55) return Array.from({ length: Math.floor(rnd() * 4) }, () => make(depth + 1));
    const o: Record<string, unknown> = {};
    for (let i = Math.floor(rnd() * 6); i > 0; i--) o[keys[Math.floor(rnd() * keys.length)]] = rnd() < 0.1 ? undefined : make(depth + 1);
    return o;
  };
  for (let i = 0; i < count; i++) yield make(0);
}

test('the same text as the reference definition for 5,000 generated values', () => {
  let n = 0;
  for (const v of values(7, 5000)) {
    assert.is(canonicalJson(v), reference(v), JSON.stringify(v));
    n++;
  }
  assert.is(n, 5000);
});

test('values the fast way could render otherwise take the slow way: the same text as the reference', () => {
  const f = () => 1;
  const nullProto = Object.assign(Object.create(null) as Record<string, unknown>, { b: 1, a: [1, { d: 2, c: 3 }] });
  const cases: unknown[] = [
    JSON.parse('{"b":1,"__proto__":{"y":1,"x":2},"a":2}'), // an own "__proto__" key, as JSON.parse makes it
    { z: 1, 10: 'ten', 9: 'nine', '1a': true, a: 0 }, // integer-like keys: an engine orders them numerically
    { when: new Date(0), b: [new Date(1)] }, // toJSON through the prototype
    { toJSON: f, a: 1 }, // an own toJSON method
    { a: [1, undefined, 3], b: { c: [undefined] } }, // undefined in an array
    { a: f, b: Symbol('s'), c: 1 }, // a function and a symbol as members
    [1, [2, [3, { b: undefined, a: null }]]],
    nullProto,
    { deep: { deeper: { deepest: { k: [{ 5: 'x', y: 1 }] } } } },
    new Map([['a', 1]]),
    {
      get g() {
        return { y: 2, x: 1 };
      },
      f: 0,
    }, // a getter
    Object.assign(new Array(3), { 0: 1, 2: 3 }), // a hole in an array
    { constructor: 1, '-1': 2, '4294967294': 3, toJSON: 'not a function', '': 4 },
    'text',
    42,
    null,
  ];
  for (const v of cases) assert.is(canonicalJson(v), reference(v), String(reference(v)));
  // Nested deeper than a copy's recursion and JSON.stringify allow together: still the same text.
  let deepArray: unknown = 1;
  let deepObject: unknown = 1;
  for (let i = 0; i < 3000; i++) {
    deepArray = [deepArray];
    deepObject = { k: deepObject };
  }
  assert.is(canonicalJson(deepArray), '['.repeat(3000) + '1' + ']'.repeat(3000));
  assert.is(canonicalJson(deepObject), '{"k":'.repeat(3000) + '1' + '}'.repeat(3000));
  // Plain data with sorted keys the fast way, equal to the slow way, also for every generated value with no such key.
  const plain = { data: { model: 'm', accountId: 'a', list: [{ y: 1, x: [true, null, 'ü\u2028'] }] }, id: 'e', revision: 3, stream: 's' };
  assert.is(canonicalJson(plain), reference(plain));
});

test('plain data takes the fast way: each member read once (the slow way after a failed copy would read it twice)', () => {
  const reads: string[] = [];
  const watched = (o: Record<string, unknown>) => new Proxy(o, { get: (t, k, r) => (typeof k === 'string' && reads.push(k), Reflect.get(t, k, r)) });
  const value = watched({ b: watched({ d: 1, c: [true] }), a: 'x' });
  assert.is(canonicalJson(value), '{"a":"x","b":{"c":[true],"d":1}}');
  assert.equal(reads.sort(), ['a', 'b', 'c', 'd']);
  // A member the fast way cannot take sends the whole value the slow way: members are read again.
  reads.length = 0;
  assert.is(canonicalJson(watched({ a: 1, b: [undefined] })), '{"a":1,"b":[]}');
  assert.ok(reads.filter((k) => k === 'a').length === 2, reads.join());
});

test('keys sorted at every depth, undefined members left out, whatever the insertion order', () => {
  assert.is(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: undefined, x: 2 }], c: null } }), '{"a":{"c":null,"d":[3,{"x":2,"z":1}]},"b":1}');
  assert.is(canonicalJson({ a: 1, b: 2 }), canonicalJson({ b: 2, a: 1 }));
});

test('an event body and its chain hash are stable (a known event, a known hash)', () => {
  const body = eventBody({
    id: 'e1',
    stream: 'account-acme',
    revision: 0,
    type: 'AccountOpened',
    timestamp: '2026-11-21T00:00:00.000Z',
    data: { name: 'Acme', accountId: 'acme' },
    metadata: { actor: 'admin:test', correlationId: 'c', causationId: null },
  });
  assert.is(
    body,
    '{"data":{"accountId":"acme","name":"Acme"},"id":"e1","metadata":{"actor":"admin:test","causationId":null,"correlationId":"c"},"revision":0,"stream":"account-acme","timestamp":"2026-11-21T00:00:00.000Z","type":"AccountOpened"}',
  );
  assert.is(chainHash(GENESIS_HASH, body), chainHash(GENESIS_HASH, reference(JSON.parse(body))));
  assert.match(chainHash(GENESIS_HASH, body), /^[0-9a-f]{64}$/);
});

test.run();
