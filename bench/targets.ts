// The three things the gateway benchmark measures, each started as its own process: the mock
// upstream (called directly: the baseline), Tollgate (`tollgate serve` on PostgreSQL, metering
// on) and the peer gateway (Portkey, from the bench-only install in bench/peer).
import { deployedNodeFlags } from './deployed-flags.ts';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { SEED_MODELS } from '../src/catalogue/seed-models.ts';
import { startChild, type Child } from './processes.ts';
import { installOnFirstUse } from '../test/support/first-use-install.ts';
import type { TargetRequest } from './load.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PEER_DIR = join(ROOT, 'bench', 'peer');
const PEER_ENTRY = join(PEER_DIR, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');

/** The model every call asks for (priced at 1.25 in the seed price list). */
export const BENCH_MODEL = 'cx/gen-6-terra';
/** The model routed to the mock's slow base URL: an upstream that answers after SLOW_UPSTREAM_MS. */
export const BENCH_SLOW_MODEL = 'cx/gen-6-sol';
export const SLOW_UPSTREAM_MS = 50;
export const PROMPT = [{ role: 'user', content: 'Say hello in one short sentence.' }];

export function chatBody(stream: boolean, model = BENCH_MODEL): string {
  return JSON.stringify({ model, messages: PROMPT, ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}) });
}

export interface Mock {
  port: number;
  baseUrl: string;
  /** The same mock answering after SLOW_UPSTREAM_MS. */
  slowBaseUrl: string;
  proc: Child;
}

export async function startMock(): Promise<Mock> {
  const { proc, match } = await startChild(process.execPath, ['--import', 'tsx', join(ROOT, 'bench', 'mock-upstream.ts')], {
    cwd: ROOT,
    ready: /listening (\d+)/,
  });
  const port = Number(match[1]);
  return { port, baseUrl: `http://127.0.0.1:${port}/v1`, slowBaseUrl: `http://127.0.0.1:${port}/delay-${SLOW_UPSTREAM_MS}/v1`, proc };
}

/** Which upstream a request reaches: the mock that answers at once, or after SLOW_UPSTREAM_MS. */
export type Upstream = 'fast' | 'slow';

export function directRequest(mock: Mock, stream: boolean, upstream: Upstream = 'fast'): TargetRequest {
  return {
    name: 'direct',
    url: `${upstream === 'slow' ? mock.slowBaseUrl : mock.baseUrl}/chat/completions`,
    headers: { 'content-type': 'application/json', authorization: 'Bearer mock' },
    body: chatBody(stream, upstream === 'slow' ? BENCH_SLOW_MODEL : BENCH_MODEL),
  };
}

// ---------------------------------------------------------------------------------------------
// Tollgate

export interface TollgateOptions {
  databaseUrl: string;
  mock: Mock;
  /** Event store schema (read models in <schema>_rm); a fresh one unless given. */
  schema?: string;
  /** Extra node flags (e.g. --cpu-prof). */
  nodeArgs?: string[];
  env?: Record<string, string>;
  /**
   * The deployed topology (docker-compose.yml): the gateway with TOLLGATE_PROJECTIONS=off and a
   * `tollgate projector` process beside it, instead of projections inside the gateway.
   */
  projector?: boolean;
  /** The checkout to build and run (default this one): another commit's tree, for a side-by-side run. */
  root?: string;
}

export interface Tollgate {
  url: string;
  schema: string;
  proc: Child;
  /** The projector process, when the bench runs the deployed topology. */
  projector: Child | null;
  adminToken: string;
  logFile: string;
  stop(): Promise<void>;
}

/**
 * `tollgate serve` as an operator runs it, on PostgreSQL, every model routed to the mock.
 * Bootstrap is off (no demo account); accounts are made through the admin API.
 */
const built = new Set<string>();
/** `npm run build` once per benchmark process and checkout, so the measured gateway is that source. */
function buildOnce(root: string): void {
  if (built.has(root)) return;
  execFileSync('npm', ['run', 'build'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  built.add(root);
}

export async function startTollgate(o: TollgateOptions): Promise<Tollgate> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-'));
  const schema = o.schema ?? `bench_gw_${randomBytes(4).toString('hex')}`;
  const config = join(dir, 'models.json');
  writeFileSync(
    config,
    JSON.stringify({
      providers: {
        mock: { type: 'openai-compatible', baseURL: o.mock.baseUrl },
        mock_slow: { type: 'openai-compatible', baseURL: o.mock.slowBaseUrl },
      },
      models: Object.fromEntries(SEED_MODELS.map((m) => [m.id, { provider: m.id === BENCH_SLOW_MODEL ? 'mock_slow' : 'mock', upstreamModel: m.id }])),
    }),
  );
  const adminToken = randomBytes(24).toString('hex');
  const logFile = join(dir, 'tollgate.log');
  const root = o.root ?? ROOT;
  buildOnce(root);
  // The compiled build, as deployed (Dockerfile): running the sources through tsx costs ~90 MB of
  // resident memory for the loader and its transformed sources. tsx only for a .ts preload.
  const preload = o.nodeArgs?.some((a) => a.endsWith('.ts')) ? ['--import', 'tsx', ...o.nodeArgs] : (o.nodeArgs ?? []);
  // The deployed node flags, so the measured process is configured as deployed.
  const production = deployedNodeFlags(root);
  const env = {
    ...process.env,
    NODE_ENV: 'production',
    DATABASE_URL: o.databaseUrl,
    TOLLGATE_SCHEMA: schema,
    PORT: '0',
    HOST: '127.0.0.1',
    TOLLGATE_MODELS_CONFIG: config,
    TOLLGATE_ADMIN_TOKEN: adminToken,
    // /metrics on the public port answers only with this token (the bench reads the append histogram).
    TOLLGATE_METRICS_TOKEN: adminToken,
    TOLLGATE_BOOTSTRAP: 'off',
    TOLLGATE_DATA_DIR: dir,
    LOG_LEVEL: 'info',
    ...(o.projector ? { TOLLGATE_PROJECTIONS: 'off' } : {}),
    ...o.env,
  };
  const main = join(root, 'dist', 'src', 'cli', 'main.js');
  const projector = o.projector
    ? (
        await startChild(process.execPath, [...production, main, 'projector'], {
          cwd: root,
          logFile: join(dir, 'projector.log'),
          ready: /projector running/,
          env,
        })
      ).proc
    : null;
  const { proc, match } = await startChild(process.execPath, [...production, ...preload, main, 'serve'], {
    cwd: root,
    logFile,
    ready: /base URL: (http:\/\/\S+)\/v1/,
    env,
  });
  return {
    url: match[1],
    schema,
    proc,
    projector,
    adminToken,
    logFile,
    async stop() {
      await proc.stop();
      await projector?.stop();
      // BENCH_KEEP=1 keeps the gateway's log (its folder is printed) for a look afterwards.
      if (process.env.BENCH_KEEP) console.log(`the gateway's log is kept: ${logFile}`);
      else rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Requests per minute of the bench plan: the most a plan may have (16,667/s), far above what a run sends. */
export const BENCH_RPM = 1_000_000;
export const BENCH_QUOTA = 1_000_000_000_000;

/** The gateway's Prometheus text (/metrics, with the token the bench started it with). */
export async function gatewayMetrics(gw: Pick<Tollgate, 'url' | 'adminToken'>): Promise<string> {
  const get = () => fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } });
  // After a long wrk phase the client's pooled keep-alive socket may have been closed by the server's
  // keep-alive timeout; one retry opens a new connection.
  const res = await get().catch(get);
  if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
  return res.text();
}

export interface BenchAccount {
  accountId: string;
  key: string;
}

/** A plan (once), an account subscribed to it and a key, through the admin API. */
export async function openBenchAccount(gw: Tollgate, name: string): Promise<BenchAccount> {
  const admin = async (path: string, body: unknown) => {
    const res = await fetch(`${gw.url}/admin/v1${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json', 'x-tollgate-actor': 'bench' },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (!res.ok && !(res.status === 409 && path === '/plans')) throw new Error(`admin ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const plans = (await fetch(`${gw.url}/admin/v1/plans`, { headers: { authorization: `Bearer ${gw.adminToken}` } }).then((r) => r.json())) as {
    data: { plan_id: string }[];
  };
  if (!plans.data.some((p) => p.plan_id === 'bench_gw')) {
    await admin('/plans', { plan_id: 'bench_gw', name: 'Benchmark', quota: BENCH_QUOTA, validity_days: 365, requests_per_minute: BENCH_RPM, models: ['*'] });
  }
  const accountId = `bench_${name}_${randomBytes(3).toString('hex')}`;
  await admin('/accounts', { account_id: accountId, name: `Benchmark ${name}` });
  await admin(`/accounts/${accountId}/subscription`, { plan_id: 'bench_gw' });
  const key = await admin(`/accounts/${accountId}/keys`, { name: 'bench' });
  return { accountId, key: String(key.key) };
}

export function tollgateRequest(gw: Tollgate, account: BenchAccount, stream: boolean, upstream: Upstream = 'fast'): TargetRequest {
  return {
    name: 'tollgate',
    url: `${gw.url}/v1/chat/completions`,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${account.key}` },
    body: chatBody(stream, upstream === 'slow' ? BENCH_SLOW_MODEL : BENCH_MODEL),
  };
}

// ---------------------------------------------------------------------------------------------
// The peer: Portkey's open-source gateway

/** Installs bench/peer from its lock file on first use, and again when that lock file changes. */
export async function ensurePeerInstalled(log: (line: string) => void): Promise<void> {
  await installOnFirstUse({ dir: PEER_DIR, label: 'the peer gateway', expected: [PEER_ENTRY] }, log);
}

export function peerVersion(): string {
  try {
    return JSON.parse(
      execFileSync('node', ['-p', 'JSON.stringify(require("./node_modules/@portkey-ai/gateway/package.json").version)'], { cwd: PEER_DIR, encoding: 'utf8' }),
    ) as string;
  } catch {
    return 'unknown';
  }
}

export interface Peer {
  url: string;
  proc: Child;
  stop(): Promise<void>;
}

export async function startPortkey(port: number): Promise<Peer> {
  // Its own server entry (the package's bin), headless (no log UI), as in production.
  const { proc } = await startChild(process.execPath, [PEER_ENTRY, `--port=${port}`, '--headless'], {
    cwd: PEER_DIR,
    ready: /Ready for connections/,
    env: { ...process.env, NODE_ENV: 'production' },
  });
  return { url: `http://127.0.0.1:${port}`, proc, stop: () => proc.stop() };
}

export function portkeyRequest(peer: Peer, mock: Mock, stream: boolean, upstream: Upstream = 'fast'): TargetRequest {
  return {
    name: 'portkey',
    url: `${peer.url}/v1/chat/completions`,
    headers: {
      'content-type': 'application/json',
      authorization: 'Bearer mock',
      'x-portkey-provider': 'openai',
      'x-portkey-custom-host': upstream === 'slow' ? mock.slowBaseUrl : mock.baseUrl,
    },
    body: chatBody(stream, upstream === 'slow' ? BENCH_SLOW_MODEL : BENCH_MODEL),
  };
}
