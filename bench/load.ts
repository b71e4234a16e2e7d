// The load generator, run as a child process of bench/run.ts (so it never shares an event loop
// with a server it measures). Takes one JSON job as argv[2], prints one JSON result line.
//   sequential: one request at a time, targets interleaved in blocks so drift on a shared
//               machine hits them alike; latency to the end of the response, and for streams
//               the time to the first SSE data chunk and to the first content token.
//   autocannon: N connections, a fixed number of requests (all of them complete, so the ledger
//               can be checked against the count), throughput and status counts.
//   closed-loop: N callers, each sending its next request a pause after its last answer, until
//               the parent closes this process's stdin; every call's start (epoch ms), time and
//               status (a light live load beside other work: bench/finance.ts).
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { loadFromFolder } from '../test/support/first-use-install.ts';

export interface TargetRequest {
  name: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

export type LoadJob =
  | { kind: 'sequential'; targets: TargetRequest[]; samples: number; warmup: number; block: number; stream: boolean }
  | { kind: 'autocannon'; target: TargetRequest; connections: number; amount: number }
  | { kind: 'closed-loop'; target: TargetRequest; connections: number; pauseMs: number };

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
}

export interface SequentialResult {
  kind: 'sequential';
  perTarget: Record<
    string,
    {
      /** Milliseconds from sending the request to the end of the response. */
      total: Summary;
      /** Streams only: to the first `data:` chunk, and to the first chunk with non-empty content. */
      firstData: Summary | null;
      firstToken: Summary | null;
      statuses: Record<string, number>;
      /** Responses that were not a complete success (non-200, or a stream without [DONE]). */
      failures: number;
      /** Successful responses, warm-up included (each is a charge on a metered target). */
      ok: number;
    }
  >;
  seconds: number;
}

export interface AutocannonResult {
  kind: 'autocannon';
  requests: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  seconds: number;
  perSecond: number;
  latencyMs: { p50: number; p99: number; mean: number };
}

export interface ClosedLoopResult {
  kind: 'closed-loop';
  /** Per call: when it was sent (epoch ms, performance.timeOrigin + performance.now()), milliseconds to the end of its answer, and its status (0: no answer). */
  calls: Array<[at: number, ms: number, status: number]>;
}

export function summarize(values: number[]): Summary {
  const s = [...values].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? NaN;
  return {
    n: s.length,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    mean: s.reduce((a, b) => a + b, 0) / (s.length || 1),
    min: s[0] ?? NaN,
    max: s[s.length - 1] ?? NaN,
  };
}

const CONTENT_TOKEN = /"delta":\{[^}]*"content":"[^"]/;

interface Sample {
  status: number;
  total: number;
  firstData: number | null;
  firstToken: number | null;
  complete: boolean;
}

function once(agent: http.Agent, t: TargetRequest, stream: boolean): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const u = new URL(t.url);
    const started = process.hrtime.bigint();
    const ms = () => Number(process.hrtime.bigint() - started) / 1e6;
    const req = http.request(
      { agent, hostname: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { ...t.headers, 'content-length': Buffer.byteLength(t.body) } },
      (res) => {
        let firstData: number | null = null;
        let firstToken: number | null = null;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          if (!stream) return;
          if (firstData === null && text.includes('data:')) firstData = ms();
          if (firstToken === null && CONTENT_TOKEN.test(text)) firstToken = ms();
        });
        res.on('end', () => {
          const total = ms();
          const complete = res.statusCode === 200 && (!stream || text.includes('data: [DONE]'));
          resolve({ status: res.statusCode ?? 0, total, firstData, firstToken, complete });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(t.body);
  });
}

async function sequential(job: Extract<LoadJob, { kind: 'sequential' }>): Promise<SequentialResult> {
  const agents = new Map(job.targets.map((t) => [t.name, new http.Agent({ keepAlive: true, maxSockets: 1 })]));
  const acc = new Map(
    job.targets.map((t) => [
      t.name,
      { total: [] as number[], firstData: [] as number[], firstToken: [] as number[], statuses: {} as Record<string, number>, failures: 0, ok: 0 },
    ]),
  );
  const started = performance.now();
  const run = async (t: TargetRequest, n: number, record: boolean) => {
    const a = acc.get(t.name)!;
    for (let i = 0; i < n; i++) {
      const s = await once(agents.get(t.name)!, t, job.stream);
      a.statuses[s.status] = (a.statuses[s.status] ?? 0) + 1;
      if (s.complete) a.ok++;
      else a.failures++;
      if (!record) continue;
      a.total.push(s.total);
      if (s.firstData !== null) a.firstData.push(s.firstData);
      if (s.firstToken !== null) a.firstToken.push(s.firstToken);
    }
  };
  for (const t of job.targets) await run(t, job.warmup, false);
  for (let done = 0; done < job.samples; done += job.block) {
    for (const t of job.targets) await run(t, Math.min(job.block, job.samples - done), true);
  }
  for (const a of agents.values()) a.destroy();
  const perTarget: SequentialResult['perTarget'] = {};
  for (const [name, a] of acc) {
    perTarget[name] = {
      total: summarize(a.total),
      firstData: job.stream ? summarize(a.firstData) : null,
      firstToken: job.stream ? summarize(a.firstToken) : null,
      statuses: a.statuses,
      failures: a.failures,
      ok: a.ok,
    };
  }
  return { kind: 'sequential', perTarget, seconds: (performance.now() - started) / 1000 };
}

async function cannon(job: Extract<LoadJob, { kind: 'autocannon' }>): Promise<AutocannonResult> {
  // The load generator is bench-only: bench/tools, installed there on first use from its lock file.
  const autocannon = await loadFromFolder<typeof import('autocannon')>(
    { dir: fileURLToPath(new URL('./tools', import.meta.url)), label: 'the load generator (autocannon)' },
    'autocannon',
    (line) => console.error(line), // stdout carries the one result line
  );
  const started = performance.now();
  const r = await autocannon({
    url: job.target.url,
    method: 'POST',
    headers: job.target.headers,
    body: job.target.body,
    connections: job.connections,
    amount: job.amount,
    timeout: 30,
  });
  const seconds = (performance.now() - started) / 1000;
  const ok = r['2xx'];
  return {
    kind: 'autocannon',
    requests: ok + r.non2xx,
    ok,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    seconds,
    perSecond: ok / seconds,
    latencyMs: { p50: r.latency.p50, p99: r.latency.p99, mean: r.latency.average },
  };
}

async function closedLoop(job: Extract<LoadJob, { kind: 'closed-loop' }>): Promise<ClosedLoopResult> {
  let running = true;
  process.stdin.on('end', () => (running = false));
  process.stdin.resume();
  const calls: ClosedLoopResult['calls'] = [];
  const caller = async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    while (running) {
      const at = performance.timeOrigin + performance.now();
      const s = await once(agent, job.target, false).catch(() => null);
      calls.push([at, performance.timeOrigin + performance.now() - at, s?.status ?? 0]);
      await new Promise((r) => setTimeout(r, job.pauseMs));
    }
    agent.destroy();
  };
  await Promise.all(Array.from({ length: job.connections }, caller));
  return { kind: 'closed-loop', calls };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const job = JSON.parse(process.argv[2]) as LoadJob;
  const result = job.kind === 'sequential' ? await sequential(job) : job.kind === 'closed-loop' ? await closedLoop(job) : await cannon(job);
  process.stdout.write(JSON.stringify(result) + '\n');
}
