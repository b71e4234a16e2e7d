// The console's reader of a long call's NDJSON progress (web/src/admin/api/ndjson.ts), run in Node
// on hand-made responses: lines split anywhere between chunks, the result, and each way it fails
// (a line that is not JSON, an {object: "error"} line, a connection cut mid-way or before the
// result), plus a gateway that answers one JSON body.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readProgressStream, type ProgressStream } from '../web/src/admin/api/ndjson.ts';
import { ApiProblem } from '../web/src/shared/problem.ts';

const enc = new TextEncoder();

/** An NDJSON response whose body yields `chunks`, then ends (or fails, with `fail`). */
function ndjson(chunks: string[], fail = false): Response {
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (const x of chunks) c.enqueue(enc.encode(x));
      if (fail) c.error(new TypeError('network error'));
      else c.close();
    },
  });
  return new Response(body, { headers: { 'content-type': 'application/x-ndjson' } });
}

function stream(seen: Array<Record<string, unknown>>): ProgressStream {
  return { progress: 'correction.progress', onProgress: (m) => seen.push(m), result: 'reconciliation', what: 'correction', advice: 'Run it again.' };
}

async function failure(p: Promise<unknown>): Promise<ApiProblem> {
  try {
    await p;
  } catch (err) {
    assert.instance(err, ApiProblem);
    return err as ApiProblem;
  }
  return assert.unreachable('the read did not fail') as never;
}

test('progress lines are told in order, split anywhere; the result line is returned', async () => {
  const seen: Array<Record<string, unknown>> = [];
  const lines = [
    { object: 'correction.progress', phase: 'adjust', done: 0, total: 5, appended: 0, pass: 1 },
    { object: 'correction.progress', phase: 'adjust', done: 2, total: 5, appended: 2, pass: 1 },
    { object: 'correction.progress', phase: 'adjust', done: 5, total: 5, appended: 4, pass: 1 },
    { object: 'reconciliation', dry_run: false, appended: 4, already_applied: 1 },
  ]
    .map((l) => JSON.stringify(l) + '\n')
    .join('');
  // Cut into chunks of 7 bytes: lines arrive in pieces, several in one chunk, the last without a newline.
  const text = lines.slice(0, -1);
  const chunks: string[] = [];
  for (let i = 0; i < text.length; i += 7) chunks.push(text.slice(i, i + 7));
  const result = await readProgressStream<Record<string, unknown>>(ndjson(chunks), stream(seen));
  assert.equal(result, { object: 'reconciliation', dry_run: false, appended: 4, already_applied: 1 });
  assert.equal(
    seen.map((m) => [m.done, m.total, m.appended]),
    [
      [0, 5, 0],
      [2, 5, 2],
      [5, 5, 4],
    ],
  );
});

test('a line that is not JSON fails the read (502 bad_stream) after the progress before it', async () => {
  const seen: Array<Record<string, unknown>> = [];
  const p = await failure(
    readProgressStream(
      ndjson(['{"object":"correction.progress","done":1,"total":3}\n', '{"object":"correction.pro', 'gress", oops\n', '{"object":"reconciliation"}\n']),
      stream(seen),
    ),
  );
  assert.is(p.status, 502);
  assert.is(p.code, 'bad_stream');
  assert.is(p.message, 'The gateway sent a line of its correction that is not JSON.');
  assert.is(seen.length, 1);
});

test('an {object: "error"} line is thrown with the status and the error it carries', async () => {
  const p = await failure(
    readProgressStream(
      ndjson([
        '{"object":"correction.progress","done":0,"total":3}\n',
        '{"object":"error","status":503,"error":{"message":"The correction stopped.","type":"server_error","code":"store_unavailable"}}\n',
      ]),
      stream([]),
    ),
  );
  assert.is(p.status, 503);
  assert.is(p.code, 'store_unavailable');
  assert.is(p.message, 'The correction stopped.');
});

test('a connection cut mid-way, or one that ends before the result, is a network error with the advice', async () => {
  const mid = await failure(readProgressStream(ndjson(['{"object":"correction.progress","done":0,"total":3}\n'], true), stream([])));
  assert.is(mid.status, 0);
  assert.is(mid.code, 'network_error');
  assert.is(mid.message, 'The connection to the gateway was cut during the correction. Run it again.');
  const early = await failure(readProgressStream(ndjson(['{"object":"correction.progress","done":0,"total":3}\n']), stream([])));
  assert.is(early.code, 'network_error');
  assert.is(early.message, 'The correction ended before its result arrived (the connection was cut). Run it again.');
});

test('a gateway that answers one JSON body is read as such, with no progress', async () => {
  const seen: Array<Record<string, unknown>> = [];
  const res = new Response(JSON.stringify({ object: 'reconciliation', appended: 3 }), { headers: { 'content-type': 'application/json; charset=utf-8' } });
  assert.equal(await readProgressStream(res, stream(seen)), { object: 'reconciliation', appended: 3 });
  assert.is(seen.length, 0);
});

test.run();
