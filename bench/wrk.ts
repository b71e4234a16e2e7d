// wrk (github.com/wg/wrk), the load tool users measure with, as a phase beside the bench's own
// client: a separate C process, keep-alive connections, a fixed duration, latency percentiles
// from its own histogram. Installed on first use from Debian (apt-get install wrk), never by npm ci.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TargetRequest } from './load.ts';

export interface WrkResult {
  connections: number;
  seconds: number;
  /** Requests wrk completed, and how many of them were not 2xx or failed on the socket. */
  requests: number;
  non2xx: number;
  errors: number;
  perSecond: number;
  latencyMs: { p50: number; p90: number; p99: number; mean: number };
}

const hasWrk = () => spawnSync('wrk', ['--version']).error === undefined;

/** Installs wrk with apt-get when it is missing (the bench's first run); false when that is not possible. */
export function ensureWrk(log: (line: string) => void): boolean {
  if (hasWrk()) return true;
  log('installing wrk: apt-get install -y wrk (first run only)');
  const sudo = process.getuid?.() === 0 ? [] : ['sudo', '-n'];
  const [cmd, ...args] = [...sudo, 'apt-get', 'install', '-y', '--no-install-recommends', 'wrk'];
  const r = spawnSync(cmd, args, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  if (r.status !== 0 || !hasWrk()) {
    log('wrk is not available (apt-get install wrk failed): the wrk phase is skipped');
    return false;
  }
  return true;
}

const lua = (s: string) => JSON.stringify(s); // a JSON string is a valid Lua string literal for these bodies

/** The request as a wrk script; `done` prints one JSON line with the latency percentiles (µs). */
function script(t: TargetRequest): string {
  const headers = Object.entries(t.headers)
    .map(([k, v]) => `wrk.headers[${lua(k)}] = ${lua(v)}`)
    .join('\n');
  return `wrk.method = "POST"
wrk.body = ${lua(t.body)}
${headers}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK_RESULT {"requests":%d,"non2xx":%d,"errors":%d,"duration_us":%d,"p50":%d,"p90":%d,"p99":%d,"mean":%f}\\n',
    summary.requests, e.status, e.connect + e.read + e.write + e.timeout, summary.duration,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean))
end
`;
}

/** `connections` keep-alive connections on one wrk thread for `seconds`, against one target. */
export function runWrk(t: TargetRequest, opts: { connections: number; seconds: number }): WrkResult {
  const dir = mkdtempSync(join(tmpdir(), 'bench-wrk-'));
  try {
    const file = join(dir, 'request.lua');
    writeFileSync(file, script(t));
    const out = execFileSync('wrk', ['-t1', `-c${opts.connections}`, `-d${opts.seconds}s`, '--timeout', '30s', '-s', file, t.url], { encoding: 'utf8' });
    const line = /WRK_RESULT (\{.*\})/.exec(out)?.[1];
    if (!line) throw new Error(`wrk printed no result:\n${out}`);
    const r = JSON.parse(line) as {
      requests: number;
      non2xx: number;
      errors: number;
      duration_us: number;
      p50: number;
      p90: number;
      p99: number;
      mean: number;
    };
    const seconds = r.duration_us / 1e6;
    return {
      connections: opts.connections,
      seconds,
      requests: r.requests,
      non2xx: r.non2xx,
      errors: r.errors,
      perSecond: r.requests / seconds,
      latencyMs: { p50: r.p50 / 1000, p90: r.p90 / 1000, p99: r.p99 / 1000, mean: r.mean / 1000 },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
