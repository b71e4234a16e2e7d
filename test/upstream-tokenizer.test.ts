import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  IMAGE_PART_TOKENS,
  countMessageTokens,
  countMessageTokensYielding,
  countTextTokens,
  decodeTokens,
  encodeText,
  tokenPieces,
  warmTokenizer,
} from '../src/upstream/tokenizer.ts';
import type { ChatMessage, ToolDefinition } from '../src/upstream/port.ts';
import { referenceO200k } from './support/test-tools.ts';
import { encode as libraryEncode } from 'gpt-tokenizer/encoding/o200k_base';

test.before(() => warmTokenizer());

test('o200k_base token ids and counts of known strings', () => {
  assert.equal(encodeText('hello world'), [24912, 2375]);
  assert.is(countTextTokens('hello world'), 2);
  assert.is(countTextTokens('Hello, world!'), 4); // Hello | , | world | !
  assert.is(countTextTokens(''), 0);
  assert.is(countTextTokens('user'), 1);
});

test('decode(encode(text)) gives the text back, in any script', () => {
  for (const text of ['Grüße aus Köln', '世界你好，今天怎么样？', 'emoji 😀👍🏽 mix', 'tabs\tand\nnew\r\nlines', '']) {
    assert.is(decodeTokens(encodeText(text)), text);
  }
});

test('special-token text from a user is counted as plain text, never refused', () => {
  const count = countTextTokens('before <|endoftext|> after');
  assert.ok(count > 3);
  assert.is(decodeTokens(encodeText('<|endoftext|>')), '<|endoftext|>');
});

test('tokenPieces concatenate back to the text and sum to the count', () => {
  for (const text of ['The quick brown fox jumps over the lazy dog.', 'héllo 😀 世界 wörld']) {
    const pieces = tokenPieces(text);
    assert.is(pieces.map((p) => p.text).join(''), text);
    assert.is(
      pieces.reduce((sum, p) => sum + p.tokens, 0),
      countTextTokens(text),
    );
  }
  // ASCII text: exactly one token per piece.
  assert.ok(tokenPieces('The quick brown fox').every((p) => p.tokens === 1));
});

test('chat accounting follows OpenAI: 3 per message + role + content (+ name), 3 to prime the reply', () => {
  assert.is(countMessageTokens([{ role: 'user', content: 'Hello' }]), 3 + 1 + 1 + 3);
  const two: ChatMessage[] = [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'hello world', name: 'alice' },
  ];
  const expected = 3 + (3 + 1 + countTextTokens('You are terse.')) + (3 + 1 + 2 + 1 + countTextTokens('alice'));
  assert.is(countMessageTokens(two), expected);
  assert.is(countMessageTokens([{ role: 'assistant', content: null }]), 3 + 3 + countTextTokens('assistant'));
});

test('image parts, tool calls and tool definitions are counted', () => {
  const withImage: ChatMessage[] = [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'What is this?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
      ],
    },
  ];
  assert.is(countMessageTokens(withImage), 3 + 3 + 1 + countTextTokens('What is this?') + IMAGE_PART_TOKENS);

  const call: ChatMessage = {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
  };
  const plain = countMessageTokens([{ role: 'assistant', content: null }]);
  assert.is(countMessageTokens([call]), plain + 3 + countTextTokens('get_weather') + countTextTokens('{"city":"Paris"}'));

  const tools: ToolDefinition[] = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }];
  const base = countMessageTokens([{ role: 'user', content: 'hi' }]);
  assert.is(countMessageTokens([{ role: 'user', content: 'hi' }], tools), base + 7 + 3 + countTextTokens(JSON.stringify(tools[0]!.function)));
});

test('a long prompt is counted in slices: other work runs in between, and the count is the same', async () => {
  const prose =
    "It's 12:30 now; the quick brown fox (aged 7) jumps over the lazy dog.\nThen: 'quotes', URLs like https://example.com/a?b=1 and émigré café naïveté. ".repeat(
      6_000,
    );
  const messages: ChatMessage[] = [
    { role: 'system', content: prose.slice(0, 40_000) },
    {
      role: 'user',
      content: [
        { type: 'text', text: prose },
        { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
      ],
    },
  ];
  const tools: ToolDefinition[] = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }];
  let ticks = 0;
  const ticker = setInterval(() => ticks++, 0);
  const sliced = await countMessageTokensYielding(messages, tools);
  clearInterval(ticker);
  assert.is(sliced, countMessageTokens(messages, tools), 'cut only where a piece starts: the same count');
  assert.ok(ticks > 0, 'the event loop ran other work while the prompt was counted');
  // No space between letters to cut at (CJK): cut anyway, off by at most a token per slice.
  const cjk: ChatMessage[] = [{ role: 'user', content: '漢字仮名交じり文を数える。'.repeat(20_000) }];
  const whole = countMessageTokens(cjk);
  assert.ok(Math.abs((await countMessageTokensYielding(cjk)) - whole) <= 20, `${whole}`);
});

test('ordinary text is counted exactly (its speed is measured by npm run bench)', () => {
  const text = 'The quick brown fox jumps over the lazy dog. '.repeat(2_500); // ~110 KB
  assert.is(countTextTokens(text), 25_001); // 10 per sentence, plus the final lone space
});

test('hostile long runs stay linear and still round-trip', () => {
  const run = 'a'.repeat(200_000);
  const started = performance.now();
  const tokens = encodeText(run);
  // Linear takes well under a second; quadratic on 200 KB would take many minutes. The bound sits
  // far from both: it catches the blow-up, not a slow machine.
  assert.ok(performance.now() - started < 30_000, 'a 200 KB single-letter run must not go quadratic');
  assert.is(decodeTokens(tokens), run);

  let random = '';
  let state = 7;
  for (let i = 0; i < 20_000; i++) {
    state = (state * 1103515245 + 12345) >>> 0;
    random += String.fromCharCode(97 + ((state >>> 16) % 26));
  }
  assert.is(decodeTokens(encodeText(random)), random);
  assert.is(countTextTokens(random), encodeText(random).length);
});

test("gpt-tokenizer gives exactly js-tiktoken's o200k tokens, in any script", async () => {
  // The gateway counts with gpt-tokenizer (for memory and speed); js-tiktoken, a port of
  // OpenAI's tiktoken, is the reference here (installed for this test only, in test/tools).
  const reference = await referenceO200k();
  const pieces = [
    'a',
    'b',
    'e',
    ' ',
    '  ',
    '\n',
    '\r\n',
    '\t',
    '.',
    ',',
    '!',
    '?',
    'é',
    'ü',
    'ß',
    '世',
    '界',
    '😀',
    '👍🏽',
    '1',
    '23',
    '456',
    "'s",
    "'LL",
    '-',
    '_',
    '(',
    ')',
    '{',
    '"',
    'Ü',
    'Ω',
    'ж',
    'ا',
    'ह',
    'A',
    'Z',
    'the',
    'The',
    ' the',
    'ing',
    'tion',
    'http://x.y/z',
    '\u0301',
    '\u200d',
    '<|endoftext|>',
    'x'.repeat(20),
    'ab'.repeat(15),
    '  \n  ',
    '   ',
  ];
  let state = 12345;
  const next = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32;
  for (let k = 0; k < 3000; k++) {
    let text = '';
    for (let i = 1 + Math.floor(next() * 40); i > 0; i--) text += pieces[Math.floor(next() * pieces.length)];
    const expected = reference.encode(text, [], []);
    // Raw library encoding: encodeText() chunks letter runs over 32 (see tokenizer.ts).
    assert.equal(libraryEncode(text, { disallowedSpecial: new Set() }), expected, JSON.stringify(text));
    assert.is(decodeTokens(expected), reference.decode(expected));
  }
  for (const text of ['hello world', 'The quick brown fox jumps over the lazy dog.', 'Grüße aus Köln 世界你好 😀👍🏽']) {
    assert.equal(encodeText(text), reference.encode(text, [], []));
    assert.is(decodeTokens(encodeText(text)), reference.decode(reference.encode(text, [], [])));
  }
});

test.run();
