// The worst single request a caller can send, with and without a key (issue #30): for each hostile
// body, how long it holds the gateway's event loop and how much memory it takes.
//
//   node --import tsx bench/worst-request.ts            (prints a Markdown table)
//   BENCH_ONLY="10 MB string" BENCH_NODE_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof" ...   (one case, profiled)
//
// A gateway is started as deployed (`tollgate serve`, embedded PGlite, the start script's V8
// flags, read from package.json). A zero-quota key on a 5-calls-a-minute plan and a key with quota are the "with a key"
// callers; bodies "at the limit" are as large as TOLLGATE_MAX_REQUEST_MB allows (default 10). For each case,
// while the one request runs:
// - event-loop hold: /healthz is called back to back on another connection; the longest answer,
//   minus the median answer when idle, is how long the loop was held (a loop held for 10 ms
//   delays the probe that arrived during it by up to 10 ms);
// - loop CPU: the CPU time the gateway's main thread ran during one probe's round trip (the most
//   of any probe, minus an idle probe's), from /proc/<pid>/task/<pid>/schedstat. On a loaded
//   machine the wait also counts the time the gateway was not scheduled at all, this does not;
//   both are upper bounds of the hold (the CPU one also counts work done after the answer left
//   while the probing client itself waited to be scheduled).
// - memory: the process's resident memory (/proc/<pid>/status VmRSS) sampled every 5 ms; the
//   peak minus the resident memory just before the request.
// Each case runs RUNS times (default 3) and the worst of the runs is kept.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { deployedNodeFlags } from './deployed-flags.ts';
import { chatWithInlineImage } from '../test/support/inline-image.ts';
import { schedstat } from './thread-stats.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const RUNS = Number(process.env.RUNS ?? 3);
const ADMIN = `tg_admin_${randomBytes(24).toString('base64url')}`;
const MB = 1024 * 1024;
const LIMIT_MB = Number(process.env.TOLLGATE_MAX_REQUEST_MB ?? 10);

interface Reply {
  status: number;
  text: string;
}

function send(origin: string, path: string, opts: { method?: string; headers?: Record<string, string>; body?: Buffer | string; agent?: Agent } = {}) {
  return new Promise<Reply>((resolve, reject) => {
    const body = opts.body ?? '';
    const headers = {
      ...(opts.body !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}),
      ...opts.headers,
    };
    const req = request(origin + path, { method: opts.method ?? (opts.body === undefined ? 'GET' : 'POST'), headers, agent: opts.agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' || err.code === 'ECONNRESET' ? undefined : reject(err)));
    req.end(body);
  });
}

/** CPU time (ms) the gateway's main thread, its event loop, has run: on a loaded machine a wait also counts time the process was not scheduled, this does not. */
const loopCpu = (pid: number) => schedstat(pid).ran;
/** CPU time (ms) per thread of the gateway, by thread name (threads of one name summed). */
function threadCpu(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim() + (tid === String(pid) ? ' (main)' : '');
      out.set(name, (out.get(name) ?? 0) + schedstat(pid, Number(tid)).ran);
    } catch {
      /* the thread ended */
    }
  }
  return out;
}
/** Time (ms) the gateway's main thread has waited, runnable, for a CPU another process or thread held (schedstat's second field). */
const loopRunQueue = (pid: number) => schedstat(pid).queued;
const rss = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

async function startGateway() {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-worst-'));
  // BENCH_NODE_FLAGS adds flags to the gateway's node, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to see where a turn goes.
  const extra = (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...deployedNodeFlags(ROOT), ...extra, '--import', 'tsx', 'src/cli/main.ts', 'serve'], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: '0',
      TOLLGATE_DATA_DIR: dir,
      TOLLGATE_ADMIN_TOKEN: ADMIN,
      TOLLGATE_BOOTSTRAP: 'off',
      LOG_LEVEL: 'warn',
      DATABASE_URL: '',
      TOLLGATE_MAX_REQUEST_MB: String(LIMIT_MB),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const origin = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      // BENCH_GATEWAY_LOG=<file> keeps the gateway's output (with BENCH_NODE_FLAGS=--trace-gc, its collections).
      if (process.env.BENCH_GATEWAY_LOG) appendFileSync(process.env.BENCH_GATEWAY_LOG, d);
      out += d;
      const m = /base URL: (http:\/\/\S+)\/v1/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`gateway exited ${code}: ${out}`)));
  });
  return {
    origin,
    pid: child.pid!,
    stop() {
      child.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A key of a new account on a plan of `quota` tokens and `perMinute` calls a minute. */
async function keyWith(origin: string, id: string, quota: number, perMinute: number): Promise<string> {
  const admin = (path: string, body: unknown) =>
    send(origin, `/admin/v1${path}`, { headers: { authorization: `Bearer ${ADMIN}` }, body: JSON.stringify(body) });
  await admin('/plans', { plan_id: id, name: id, quota, validity_days: 30, requests_per_minute: perMinute, models: ['*'] });
  await admin('/accounts', { account_id: id, name: id });
  await admin(`/accounts/${id}/subscription`, { plan_id: id });
  return JSON.parse((await admin(`/accounts/${id}/keys`, { name: 'k' })).text).key as string;
}

interface Case {
  name: string;
  path: string;
  body: Buffer;
  /** A function for headers that must differ per run (a new Idempotency-Key each time). */
  headers: Record<string, string> | (() => Record<string, string>);
}

function cases(key: string, paying: string): Case[] {
  const gz = { 'content-encoding': 'gzip' };
  const keyed = { authorization: `Bearer ${key}` };
  const paid = { authorization: `Bearer ${paying}` };
  const atLimit = LIMIT_MB * MB - 200;
  const chat = (extra: string) => Buffer.from(`{"model":"cx/gen-6-luna","messages":[{"role":"user","content":"hi"}]${extra}}`);
  const bomb = gzipSync(Buffer.from(`[${'{},'.repeat(8_000_000)}{}]`), { level: 9 });
  const longString = (n: number) => chat(`,"metadata":{"a":"${'x'.repeat(n)}"}`);
  // Just inside every shape limit: 9 arrays of 10,000 numbers (90,000 values and a few).
  const manyValues = chat(`,"metadata":{${Array.from({ length: 9 }, (_, i) => `"m${i}":[${'0,'.repeat(9_999)}0]`).join(',')}}`);
  // Strings just under the length the parser takes out of the text to decode in slices (1 KB).
  const mediumStrings = chat(`,"metadata":{"a":[${Array.from({ length: 10_000 }, () => `"${'y'.repeat(1000)}"`).join(',')}]}`);
  // As many strings as the value limit lets through, each just long enough to be cut out of the text.
  const shortStrings = chat(
    `,"metadata":{${Array.from({ length: 10 }, (_, i) => `"m${i}":[${Array.from({ length: 9_990 }, () => '"zzzzzzzzzzzzzzzz"').join(',')}]`).join(',')}}`,
  );
  const deep = chat(`,"metadata":${'{"a":'.repeat(60)}1${'}'.repeat(60)}`);
  const prompt = (bytes: number) =>
    Buffer.from(JSON.stringify({ model: 'cx/gen-6-luna', max_tokens: 5, messages: [{ role: 'user', content: 'word '.repeat(bytes / 5) }] }));
  const image = (bytes: number) => Buffer.from(chatWithInlineImage(bytes));
  return [
    { name: 'no key: gzip bomb (8M empty objects) to /admin/v1/plans', path: '/admin/v1/plans', body: bomb, headers: gz },
    { name: `no key: ${LIMIT_MB} MB body to /admin/v1/plans`, path: '/admin/v1/plans', body: longString(atLimit), headers: {} },
    { name: 'no key: gzip bomb to /v1/chat/completions', path: '/v1/chat/completions', body: bomb, headers: gz },
    { name: 'no key: body on GET /healthz', path: '/healthz', body: Buffer.from('{"a":1}'), headers: {} },
    { name: 'zero-quota key: gzip bomb (8M empty objects)', path: '/v1/chat/completions', body: bomb, headers: { ...keyed, ...gz } },
    {
      name: 'zero-quota key: metadata array past the item limit',
      path: '/v1/chat/completions',
      body: chat(`,"metadata":[${'0,'.repeat(1_000_000)}0]`),
      headers: keyed,
    },
    { name: 'zero-quota key: 90,000 values (inside every limit)', path: '/v1/chat/completions', body: manyValues, headers: keyed },
    { name: 'zero-quota key: 60 levels deep', path: '/v1/chat/completions', body: deep, headers: keyed },
    { name: `zero-quota key: ${LIMIT_MB} MB string (the size limit)`, path: '/v1/chat/completions', body: longString(atLimit), headers: keyed },
    {
      name: `zero-quota key: ${LIMIT_MB} MB gzipped to ${Math.round((LIMIT_MB * 1024) / 1000)} KB`,
      path: '/v1/chat/completions',
      body: gzipSync(longString(atLimit), { level: 9 }),
      headers: { ...keyed, ...gz },
    },
    {
      name: 'zero-quota key: 5 MB prompt',
      path: '/v1/chat/completions',
      body: Buffer.from(JSON.stringify({ model: 'cx/gen-6-luna', messages: [{ role: 'user', content: 'word '.repeat(1_000_000) }] })),
      headers: keyed,
    },
    { name: 'zero-quota key: 10,000 strings of 1,000 bytes', path: '/v1/chat/completions', body: mediumStrings, headers: keyed },
    { name: 'zero-quota key: 99,900 strings of 16 bytes', path: '/v1/chat/completions', body: shortStrings, headers: keyed },
    {
      name: `zero-quota key: a number of ${LIMIT_MB} MB`,
      path: '/v1/chat/completions',
      body: chat(`,"metadata":[1,${'9'.repeat(atLimit - 100)}]`),
      headers: keyed,
    },
    {
      name: `zero-quota key: ${LIMIT_MB} MB of commas gzipped`,
      path: '/v1/chat/completions',
      body: gzipSync(chat(`,"metadata":[${','.repeat(atLimit - 100)}]`)),
      headers: { ...keyed, ...gz },
    },
    {
      name: `zero-quota key: ${LIMIT_MB} MB of blanks`,
      path: '/v1/chat/completions',
      body: chat(`,"metadata":[1,${' '.repeat(atLimit - 100)}2]`),
      headers: keyed,
    },
    { name: 'key with quota: 10,000 strings of 1,000 bytes', path: '/v1/chat/completions', body: mediumStrings, headers: paid },
    { name: `key with quota: ${LIMIT_MB} MB string (the size limit)`, path: '/v1/chat/completions', body: longString(atLimit), headers: paid },
    { name: `key with quota: ${LIMIT_MB} MB inline image, answered`, path: '/v1/chat/completions', body: image(atLimit - 300), headers: paid },
    {
      // The body is hashed (canonical JSON, SHA-256) and validated once more before the claim.
      name: `key with quota: ${LIMIT_MB} MB inline image with an Idempotency-Key, answered`,
      path: '/v1/chat/completions',
      body: image(atLimit - 300),
      headers: () => ({ ...paid, 'idempotency-key': randomBytes(12).toString('hex') }),
    },
    { name: `key with quota: ${LIMIT_MB} MB prompt, counted and answered`, path: '/v1/chat/completions', body: prompt(atLimit - 200), headers: paid },
  ];
}

async function measure(gw: { origin: string; pid: number }, c: Case, idle: { ms: number; cpu: number }) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const startRss = rss(gw.pid);
  let peakRss = startRss;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, rss(gw.pid))), 5);
  let done = false;
  let worstProbe = 0;
  let worstCpu = 0;
  let worstProbeQueued = 0;
  const probing = (async () => {
    while (!done) {
      const t = performance.now();
      const cpu = loopCpu(gw.pid);
      const queued = loopRunQueue(gw.pid);
      await send(gw.origin, '/healthz', { agent });
      const took = performance.now() - t;
      if (took > worstProbe) worstProbeQueued = loopRunQueue(gw.pid) - queued;
      worstProbe = Math.max(worstProbe, took);
      worstCpu = Math.max(worstCpu, loopCpu(gw.pid) - cpu);
    }
  })();
  const threadsBefore = threadCpu(gw.pid);
  const selfBefore = process.cpuUsage();
  const t = performance.now();
  const headers = typeof c.headers === 'function' ? c.headers() : c.headers;
  const reply = await send(gw.origin, c.path, { method: c.path === '/healthz' ? 'GET' : 'POST', headers, body: c.body });
  const elapsed = performance.now() - t;
  if (process.env.BENCH_THREADS) {
    const after = threadCpu(gw.pid);
    const self = process.cpuUsage(selfBefore);
    const used = [...after].map(([name, ms]) => `${name} ${(ms - (threadsBefore.get(name) ?? 0)).toFixed(0)}`).filter((x) => !x.endsWith(' 0'));
    console.error(
      `${c.name}: ${elapsed.toFixed(0)} ms; gateway threads' CPU (ms): ${used.join(', ')}; this client ${((self.user + self.system) / 1000).toFixed(0)}`,
    );
  }
  await new Promise((r) => setTimeout(r, 50)); // the aftermath (garbage, logging) counts too
  done = true;
  await probing;
  clearInterval(sampler);
  agent.destroy();
  let code = '';
  try {
    code = (JSON.parse(reply.text) as { error?: { code?: string; type?: string } }).error?.code ?? '';
  } catch {
    /* not JSON */
  }
  return {
    status: reply.status,
    code,
    elapsed,
    hold: Math.max(0, worstProbe - idle.ms),
    cpuHold: Math.max(0, worstCpu - idle.cpu),
    queued: worstProbeQueued,
    memory: peakRss - startRss,
  };
}

/** The median wait and main-thread CPU of a /healthz call when nothing else runs. */
async function idleProbe(origin: string, pid: number): Promise<{ ms: number; cpu: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const times: number[] = [];
  const cpus: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t = performance.now();
    const cpu = loopCpu(pid);
    await send(origin, '/healthz', { agent });
    times.push(performance.now() - t);
    cpus.push(loopCpu(pid) - cpu);
  }
  agent.destroy();
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[100];
  return { ms: median(times), cpu: median(cpus) };
}

const gw = await startGateway();
try {
  const key = await keyWith(gw.origin, 'attacker', 0, 5);
  const paying = await keyWith(gw.origin, 'payer', 1_000_000_000, 1000);
  const idle = await idleProbe(gw.origin, gw.pid);
  console.log(
    `Node ${process.version}, ${RUNS} runs per case (worst kept), bodies up to ${LIMIT_MB} MB; idle /healthz median ${idle.ms.toFixed(2)} ms (${idle.cpu.toFixed(2)} ms of loop CPU)\n`,
  );
  console.log(
    '| request | bytes sent | answer | took (ms) | event-loop hold (ms) | of it, loop waiting for a CPU (ms) | loop CPU during one probe (ms) | memory (MB) |',
  );
  console.log('|---|---:|---|---:|---:|---:|---:|---:|');
  // BENCH_ONLY=<text> runs only the cases whose name holds it.
  for (const c of cases(key, paying).filter((c) => c.name.includes(process.env.BENCH_ONLY ?? ''))) {
    let worst = { status: 0, code: '', elapsed: 0, hold: 0, cpuHold: 0, queued: 0, memory: 0 };
    for (let i = 0; i < RUNS; i++) {
      const m = await measure(gw, c, idle);
      worst = {
        ...m,
        elapsed: Math.max(worst.elapsed, m.elapsed),
        hold: Math.max(worst.hold, m.hold),
        queued: m.hold >= worst.hold ? m.queued : worst.queued,
        cpuHold: Math.max(worst.cpuHold, m.cpuHold),
        memory: Math.max(worst.memory, m.memory),
      };
      await new Promise((r) => setTimeout(r, 300));
    }
    console.log(
      `| ${c.name} | ${c.body.length.toLocaleString('en')} | ${worst.status} ${worst.code} | ${worst.elapsed.toFixed(0)} | ${worst.hold.toFixed(1)} | ${worst.queued.toFixed(1)} | ${worst.cpuHold.toFixed(1)} | ${worst.memory.toFixed(1)} |`,
    );
  }
} finally {
  gw.stop();
}
