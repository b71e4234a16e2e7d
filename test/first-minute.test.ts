// A newcomer's first minute with `npm start`: the banner names the pages with their full URLs, a
// browser opening `/` is sent to them while API clients keep the JSON, the books hold money at once
// (the banner says so, and the finance report and reconciliation show it), and the log is readable
// on a terminal (pino-pretty) but JSON lines when output is not a terminal or LOG_FORMAT=json.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnGateway } from './support/gateway.ts';

test('a new ledger has money on its books: revenue, deferred revenue, upstream cost and margin, reconciled, and the banner says so', async () => {
  const gw = await spawnGateway();
  try {
    assert.match(gw.output(), /demo books: account demo-books bought the demo plan/);
    const token = /admin token[^:]*: (\S+)/.exec(gw.output())?.[1];
    assert.ok(token, gw.output());
    const site = gw.baseUrl.replace(/\/v1$/, '');
    const day = new Date().toISOString().slice(0, 10);
    const read = async (path: string) => {
      const res = await fetch(`${site}/admin/v1/finance/${path}?from=${day}&to=${day}`, { headers: { authorization: `Bearer ${token}` } });
      assert.is(res.status, 200);
      return (await res.json()) as any;
    };
    const report = await read('report');
    assert.is(report.totals.payments, 2000, 'the demo plan bought by a recorded transfer');
    assert.ok(report.totals.revenue > 0, 'its calls recognised revenue');
    assert.ok(report.totals.upstream_cost > 0 && report.totals.unpriced_calls === 0, 'and cost something upstream, priced');
    assert.is(report.totals.margin, report.totals.revenue - report.totals.upstream_cost);
    const deferred = report.deferred.filter((d: any) => d.account_id === 'demo-books');
    assert.is(deferred.at(-1).deferred, 2000 - report.totals.revenue, 'the rest is deferred');
    const rec = await read('reconciliation');
    assert.is(rec.total.difference, 0);
    // The demo key's own account is the newcomer's: nothing used yet.
    const usage = await fetch(`${gw.baseUrl}/usage?daily=true&range=7d`, { headers: { authorization: `Bearer ${gw.key}` } });
    assert.is(((await usage.json()) as any).totals.billed, 0);
  } finally {
    await gw.stop();
  }
});

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';

test('the banner names the pages, and `/` sends a browser to them while API clients get JSON', async () => {
  const gw = await spawnGateway();
  try {
    const site = gw.baseUrl.replace(/\/v1$/, '');
    for (const page of ['/app/chat', '/app/usage', '/admin']) assert.ok(gw.output().includes(`${site}${page}`), `${page} in:\n${gw.output()}`);
    const browser = await fetch(`${site}/`, { headers: { accept: BROWSER_ACCEPT }, redirect: 'manual' });
    assert.is(browser.status, 302);
    assert.is(new URL(browser.headers.get('location')!, site).pathname, '/app/chat');
    for (const accept of [undefined, '*/*', 'application/json']) {
      const api = await fetch(`${site}/`, { headers: accept ? { accept } : {}, redirect: 'manual' });
      assert.is(api.status, 200, `Accept: ${accept}`);
      assert.is(((await api.json()) as { name: string }).name, 'tollgate');
    }
    // Not a terminal (a pipe): the log is JSON lines.
    await fetch(`${site}/healthz`);
    const logLine = await eventually(() =>
      gw
        .output()
        .split('\n')
        .find((l) => l.includes('"msg":"request"')),
    );
    assert.is(JSON.parse(logLine).msg, 'request');
  } finally {
    await gw.stop();
  }
});

/** `npm start`'s command under a pseudo-terminal (util-linux `script`), as a user's terminal runs it. */
function startOnTerminal(env: Record<string, string>): { child: ChildProcess; output: () => string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-tty-'));
  const command = `${process.execPath} --import tsx src/cli/main.ts serve`;
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    cwd: new URL('..', import.meta.url).pathname,
    env: { ...process.env, PORT: '0', TOLLGATE_DATA_DIR: dir, LOG_LEVEL: 'info', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return { child, output: () => out, dir };
}

async function eventually(find: () => string | undefined, what = 'the log line'): Promise<string> {
  const until = Date.now() + 60_000;
  for (;;) {
    const found = find();
    if (found) return found;
    assert.ok(Date.now() < until, `${what} never came`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

for (const [format, readable] of [
  [undefined, true],
  ['json', false],
] as const)
  test(`on a terminal, LOG_FORMAT ${format ?? 'unset'}: the log is ${readable ? 'readable lines' : 'JSON lines'}`, async () => {
    const tty = startOnTerminal(format ? { LOG_FORMAT: format } : {});
    try {
      const base = await eventually(() => /base URL: (\S+)/.exec(tty.output())?.[1], 'the banner');
      await fetch(`${base.replace(/\/v1$/, '')}/healthz`);
      // eslint-disable-next-line no-control-regex
      const plain = () => tty.output().replace(/\u001b\[[0-9;]*m/g, '');
      // The access log line of that request: `[time] INFO: request` and its fields below, or JSON.
      const line = await eventually(() =>
        plain()
          .split('\n')
          .find((l) => /INFO: request\s*$/.test(l) || l.includes('"msg":"request"')),
      );
      if (readable) assert.match(line, /^\[[\d:.]+\] INFO: request/);
      else assert.is(JSON.parse(line.trim()).msg, 'request');
    } finally {
      tty.child.kill('SIGTERM');
      await new Promise((r) => tty.child.once('exit', r));
      rmSync(tty.dir, { recursive: true, force: true });
    }
  });

test.run();
