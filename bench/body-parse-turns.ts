// How long one turn of the event loop is held while a large request body is parsed (issue #30):
// the whole text at once (Buffer#toString, a turn, JSON.parse: the code before) against
// parseInTurns (src/http/json-long-strings.ts: strings of 1 KB or more cut out and decoded in
// slices), side by side on the same bodies in one process.
//
//   node --max-semi-space-size=8 --heap-growing-percent=30 --v8-pool-size=1 --import tsx bench/body-parse-turns.ts
//
// Method: a setImmediate chain runs beside the parse; the longest gap between two of its ticks is
// the longest turn the parse held (garbage collection in it included). Each body is parsed
// RUNS times (default 5) each way; the table shows the median and the worst. The gateway's V8
// flags (the start script's) are the ones above. In-process, so no HTTP or scheduling noise of a
// second process: bench/worst-request.ts measures the served gateway.
import { ShapeCheck, modelCallLimits } from '../src/http/body.ts';
import { parseInTurns } from '../src/http/json-in-turns.ts';

const RUNS = Number(process.env.RUNS ?? 5);
const MB = 1_000_000;

/** `count` strings of `length` characters in arrays of 9,000 (the item limit is 10,000). */
const strings = (count: number, length: number) =>
  Buffer.from(
    JSON.stringify({
      model: 'm',
      metadata: Object.fromEntries(
        Array.from({ length: Math.ceil(count / 9000) }, (_, k) => [
          `m${k}`,
          Array.from({ length: Math.min(9000, count - k * 9000) }, () => 'y'.repeat(length)),
        ]),
      ),
    }),
  );
const bodies: Array<[string, Buffer]> = [
  [
    'an image inline (one 10 MB string) and 200 short messages',
    Buffer.from(JSON.stringify({ messages: Array.from({ length: 200 }, () => ({ role: 'user', content: 'hello there' })), image: 'Q'.repeat(10 * MB) })),
  ],
  ['1,000 strings of 10,000 characters', strings(1000, 10_000)],
  ['10,000 strings of 1,000 characters (under the cut)', strings(10_000, 1000)],
  ['78,000 strings of 125 characters', strings(78_000, 125)],
  ['99,000 strings of 16 characters', strings(99_000, 16)],
];

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function longestTurn(work: () => Promise<unknown>): Promise<number> {
  let last = performance.now();
  let worst = 0;
  let ticking = true;
  const tick = () => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  await work();
  ticking = false;
  await nextTurn();
  return worst;
}

const wholeText = async (body: Buffer) => {
  const text = body.toString('utf8');
  await nextTurn();
  return JSON.parse(text) as unknown;
};
/** Where the strings lie, as the body's reader notes them chunk by chunk while the bytes arrive (not timed). */
const stringsOf = (body: Buffer) => {
  const shape = new ShapeCheck(modelCallLimits());
  for (let at = 0; at < body.length; at += 65_536) shape.feed(body.subarray(at, at + 65_536));
  return shape;
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`Node ${process.version}, ${RUNS} runs each way, alternating; longest turn held, in ms (median / worst)\n`);
console.log('| body | bytes | whole text: median / worst | in turns: median / worst | ratio of medians |');
console.log('|---|---:|---:|---:|---:|');
for (const [name, body] of bodies) {
  const whole: number[] = [];
  const sliced: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    whole.push(await longestTurn(() => wholeText(body)));
    const spans = stringsOf(body);
    sliced.push(await longestTurn(() => parseInTurns(body, body.length, spans)));
  }
  const f = (xs: number[]) => `${median(xs).toFixed(1)} / ${Math.max(...xs).toFixed(1)}`;
  console.log(`| ${name} | ${body.length.toLocaleString('en')} | ${f(whole)} | ${f(sliced)} | ${(median(sliced) / median(whole)).toFixed(2)} |`);
}
