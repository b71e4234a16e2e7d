// Issue #30: a 10 MB request is handled in slices, a turn of the event loop each, with the same
// verdicts as the one-piece code it replaced. No timing here: the slices are counted as turns.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { SLICE_CHARS, matchesNow, matchesSliced } from '../src/http/sliced-pattern.ts';
import { validateBody } from '../src/http/validate.ts';
import { ApiError } from '../src/http/errors.ts';

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

test.run();
