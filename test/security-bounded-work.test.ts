// Issue #30: a 10 MB request is handled in slices, a turn of the event loop each, with the same
// verdicts as the one-piece code it replaced. No timing here: the slices are counted as turns.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { SLICE_CHARS, matchesNow, matchesSliced } from '../src/http/sliced-pattern.ts';
import { validateBody } from '../src/http/validate.ts';
import { ApiError } from '../src/http/errors.ts';
import { canonicalDigest } from '../src/http/body-digest.ts';
import { canonicalJson } from '../src/eventstore/canonical.ts';
import { createHash } from 'node:crypto';
import { seedFrom, seedJson } from '../src/upstream/seed.ts';
import { decodeDataUri } from '../src/calls/image-source.ts';
import { LONG_STRING_CHARS, jsonBytes } from '../src/upstream/json-slices.ts';

const IMAGE_URL = '^(https?://\\S+|data:image/(png|jpeg|jpg|gif|webp);base64,[A-Za-z0-9+/]+={0,2})$';
const BASE64 = '^[A-Za-z0-9+/]+={0,2}$';
const HTTP_URL = '^https?://\\S+$';
const MB = 1024 * 1024;

/** Turns of the event loop that pass while `work` runs. */
async function turnsDuring<T>(work: () => Promise<T>): Promise<{ turns: number; result: T }> {
  let turns = 0;
  let running = true;
  const tick = () => {
    if (!running) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  const result = await work();
  running = false;
  return { turns, result };
}

const refusal = async (body: unknown) => {
  try {
    await validateBody('chat-completions', body);
  } catch (err) {
    const e = err as ApiError;
    return { status: e.status, type: e.type, code: e.code, param: e.param, message: e.message };
  }
  return null;
};
const chat = (url: string) => ({
  model: 'm',
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'what is this?' },
        { type: 'image_url', image_url: { url } },
      ],
    },
  ],
});

test('the sliced patterns give the regular expression’s verdict on any string', async () => {
  const alphabet = fc.constantFrom(...'Aa09+/=:;,. \t\n\u00a0\u2028\ufeff\ud83dxhtps'.split(''));
  const tails = fc.array(alphabet, { maxLength: 12 }).map((cs) => cs.join(''));
  const heads = fc.constantFrom(
    '',
    'data:image/png;base64,',
    'data:image/jpg;base64,',
    'data:image/svg;base64,',
    'data:image/png,',
    'https://',
    'http://',
    'http:/',
    'ftp://',
  );
  fc.assert(
    fc.property(heads, tails, (head, tail) => {
      const s = head + tail;
      for (const pattern of [IMAGE_URL, BASE64, HTTP_URL])
        assert.is(matchesNow(pattern, s), new RegExp(pattern, 'u').test(s), `${pattern} on ${JSON.stringify(s)}`);
    }),
    { numRuns: 3000 },
  );
  for (const s of [
    'data:image/png;base64,' + 'A'.repeat(3 * MB) + '==',
    'data:image/png;base64,' + 'A'.repeat(3 * MB) + '===',
    'https://x/' + 'a'.repeat(3 * MB) + ' ',
  ])
    assert.is(await matchesSliced(IMAGE_URL, s), new RegExp(IMAGE_URL, 'u').test(s));
});

test('a 10 MB image refused for its last character: the error of a short one, found a slice per turn', async () => {
  const short = await refusal(chat('data:image/png;base64,AAAA!'));
  assert.ok(short, 'a short bad image is refused');
  assert.is(short!.status, 400);
  const { turns, result: long } = await turnsDuring(() => refusal(chat(`data:image/png;base64,${'A'.repeat(10 * MB)}!`)));
  assert.equal(long, short);
  assert.ok(turns >= Math.floor((10 * MB) / SLICE_CHARS) - 1, `checked over ${turns} turns`);
});

test('a 10 MB valid image passes, checked a slice per turn; its neighbours’ errors come first as before', async () => {
  const { turns, result } = await turnsDuring(() => refusal(chat(`data:image/png;base64,${'A'.repeat(10 * MB)}`)));
  assert.is(result, null);
  assert.ok(turns >= Math.floor((10 * MB) / SLICE_CHARS) - 1, `checked over ${turns} turns`);
  // A bad image after a bad field: the bad field is named, as the schema's order had it.
  const body = { ...chat(`data:image/png;base64,${'A'.repeat(2 * MB)}!`), temperature: 'hot' };
  const both = await refusal(body);
  const alone = await refusal({ ...chat('data:image/png;base64,AA'), temperature: 'hot' });
  assert.equal(both, alone);
});

test('Anthropic base64 sources: a 3 MB source with a bad character is refused like a short one', async () => {
  const msg = (data: string) => ({
    model: 'm',
    max_tokens: 5,
    messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data } }] }],
  });
  const refuse = async (body: unknown) => {
    try {
      await validateBody('messages', body);
    } catch (err) {
      return (err as ApiError).message;
    }
    return null;
  };
  assert.is(await refuse(msg('A'.repeat(3 * MB))), null);
  const short = await refuse(msg('AA!A'));
  assert.ok(short);
  assert.is(await refuse(msg('A'.repeat(3 * MB) + '!A')), short);
});

const oneShot = (prefix: string, value: unknown, suffix: string) =>
  createHash('sha256')
    .update(prefix + canonicalJson(value) + suffix)
    .digest('hex');

test('an Idempotency-Key body digest is the one-piece digest of its canonical JSON, any JSON', async () => {
  await fc.assert(
    fc.asyncProperty(fc.jsonValue(), fc.string(), async (value, prefix) => {
      assert.is(await canonicalDigest(prefix, value, 'null'), oneShot(prefix, value, 'null'));
    }),
    { numRuns: 300 },
  );
});

test('a 10 MB string is digested a slice per turn, escapes and surrogate pairs across the cuts included', async () => {
  // A pair straddles every slice boundary (the odd offset), escapes and non-ASCII sit around it.
  const unit = 'é"\\\n\u0001😀';
  let big = 'x'.repeat(SLICE_CHARS - 1) + '😀';
  while (big.length < 10 * MB) big += unit.repeat(1000) + 'y'.repeat(SLICE_CHARS - 1 - ((big.length + unit.length * 1000) % SLICE_CHARS)) + '😀';
  const body = { model: 'm', messages: [{ role: 'user', content: big }], z: [1, { b: null, a: big.slice(5, 9) }] };
  const { turns, result } = await turnsDuring(() => canonicalDigest('/v1/chat/completions\n', body, 'null'));
  assert.is(result, oneShot('/v1/chat/completions\n', body, 'null'));
  assert.ok(turns >= Math.floor((10 * MB) / SLICE_CHARS) - 1, `hashed over ${turns} turns`);
});

test('the simulated upstream’s seed material: small values as before, long strings read at their ends, a bounded total', () => {
  const messages = [{ role: 'user', content: 'hello there' }];
  assert.is(seedJson(messages), JSON.stringify(messages), 'a small conversation is its JSON, so seeds are unchanged');
  assert.is(seedFrom('chat', 'm', seedJson(messages)), seedFrom('chat', 'm', JSON.stringify(messages)));
  const image = (middle: string) => [
    { role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(5 * MB)}${middle}${'A'.repeat(5 * MB)}` } }] },
  ];
  assert.is(seedFrom('chat', 'm', seedJson(image('B'))), seedFrom('chat', 'm', seedJson(image('B'))));
  // Bounded work: a change in the middle of 10 MB is not read; a change of length or at an end is.
  assert.ok(seedJson(image('B')).length < 100_000);
  assert.is(seedFrom('chat', 'm', seedJson(image('B'))), seedFrom('chat', 'm', seedJson(image('C'))));
  assert.is.not(seedFrom('chat', 'm', seedJson(image('B'))), seedFrom('chat', 'm', seedJson(image('BB'))));
  // Past the budget (a megabyte of strings), a string counts by its length alone.
  const many = (last: string) => [...Array.from({ length: 40 }, () => 'w'.repeat(30_000)), last];
  assert.ok(seedJson(many('x'.repeat(5 * MB))).length < 1.1 * MB);
  assert.is(seedJson(many('a'.repeat(1000))), seedJson(many('b'.repeat(1000))));
  assert.is.not(seedJson(many('a'.repeat(1000))), seedJson(many('a'.repeat(1001))));
});

/** What decodeDataUri did in one piece before (the reference its slices must agree with). */
function decodedInOnePiece(uri: string): Buffer | string {
  const m = /^data:(image\/[a-z0-9.+-]+);base64,([A-Za-z0-9+/=\s]*)$/i.exec(uri);
  if (!m) return 'invalid_image';
  const bytes = Buffer.from(m[2].replace(/\s+/g, ''), 'base64');
  return bytes.length === 0 ? 'no data' : bytes;
}
const decoded = async (uri: string) => {
  try {
    return (await decodeDataUri(uri)).bytes;
  } catch (err) {
    const e = err as ApiError;
    return e.code === 'invalid_image' && /no data/.test(e.message) ? 'no data' : (e.code ?? 'error');
  }
};

test('image data URIs decode a slice per turn to the bytes the one-piece decoder gave', async () => {
  const data = fc.array(fc.constantFrom(...'AQgw+/09=  \n\t\u00a0!-_'.split('')), { maxLength: 30 }).map((cs) => cs.join(''));
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom('data:image/png;base64,', 'DATA:IMAGE/PNG;BASE64,', 'data:image/png,', 'data:text/plain;base64,'),
      data,
      async (head, tail) => {
        assert.equal(await decoded(head + tail), decodedInOnePiece(head + tail), JSON.stringify(head + tail));
      },
    ),
    { numRuns: 2000 },
  );
  // Groups, whitespace and padding across the slice cuts.
  const png = Buffer.from(Array.from({ length: 6 * MB }, (_, i) => (i * 7) & 255)).toString('base64');
  for (const tail of [png, png.replace(/(.{76})/g, '$1\n'), ` ${png.slice(0, -2)}= =${png.slice(-2)}`, png.slice(1)]) {
    const uri = `data:image/png;base64,${tail}`;
    const { turns, result } = await turnsDuring(() => decoded(uri));
    assert.ok(Buffer.isBuffer(result) && result.equals(decodedInOnePiece(uri) as Buffer));
    assert.ok(turns >= Math.floor(tail.length / SLICE_CHARS) - 1, `decoded over ${turns} turns`);
  }
  assert.is(await decoded(`data:image/png;base64,${png}!`), 'invalid_image', 'a bad last character is refused as before');
});

test('an upstream request body with a 10 MB string: the bytes of JSON.stringify, the string escaped a slice per turn', async () => {
  await fc.assert(
    fc.asyncProperty(fc.jsonValue(), async (value) => assert.ok((await jsonBytes(value)).equals(Buffer.from(JSON.stringify(value))))),
    { numRuns: 200 },
  );
  const image = `data:image/png;base64,${'A'.repeat(10 * MB)}`;
  const odd = `${'é'.repeat(LONG_STRING_CHARS - 1)}😀"\n\u0002${'z'.repeat(LONG_STRING_CHARS)}`;
  const body = {
    model: 'm',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: image } },
          { type: 'text', text: odd },
        ],
      },
    ],
    n: [1, null],
  };
  const { turns, result } = await turnsDuring(() => jsonBytes(body));
  assert.ok(result.equals(Buffer.from(JSON.stringify(body))));
  assert.ok(turns >= Math.floor((10 * MB) / LONG_STRING_CHARS) - 1, `escaped over ${turns} turns`);
});

test.run();
