// Gateways for tests: in-process (real HTTP on a random port, with the ledger at hand) or as a
// separate process started the way a user starts it.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { settingsFromEnv, type Settings } from '../../src/config.ts';
import { startGateway, type RunningGateway } from '../../src/server.ts';
import { openPostgres } from '../../src/eventstore/db.ts';
import { dropLedgerSchemas, uniqueSchema } from './db.ts';

export interface TestGateway extends RunningGateway {
  stop(): Promise<void>;
}

export async function startTestGateway(overrides: Partial<Settings> = {}): Promise<TestGateway> {
  const schema = uniqueSchema('gw');
  // Defaults, not this process's settings; but upstream key variables a test sets are read.
  const settings: Settings = {
    ...settingsFromEnv({}),
    upstreamSecret: (v) => process.env[v] || undefined,
    port: 0,
    dataDir: '',
    schema,
    databaseUrl: process.env.DATABASE_URL || undefined,
    logLevel: 'silent',
    ...overrides,
  };
  const gw = await startGateway(settings, pino({ level: settings.logLevel }));
  return {
    ...gw,
    async stop() {
      await gw.close();
      if (settings.databaseUrl) await dropSchemas(settings.databaseUrl, settings.schema);
    },
  };
}

export async function dropSchemas(url: string, schema: string): Promise<void> {
  const db = openPostgres(url, 1);
  await dropLedgerSchemas(db, schema);
  await db.close();
}

export interface GatewayProcess {
  baseUrl: string;
  key: string;
  child: ChildProcess;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * `npm start` as a user runs it (node + tsx on src/cli/main.ts), on a fresh data directory;
 * `nodeArgs` go to node after tsx (e.g. `--import` of test/support/test-clock.ts).
 */
export async function spawnGateway(env: Record<string, string> = {}, opts: { nodeArgs?: string[] } = {}): Promise<GatewayProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-test-'));
  const schema = uniqueSchema('gp');
  const child = spawn(process.execPath, ['--import', 'tsx', ...(opts.nodeArgs ?? []), 'src/cli/main.ts', 'serve'], {
    cwd: new URL('../..', import.meta.url).pathname,
    env: { ...process.env, PORT: '0', TOLLGATE_DATA_DIR: dataDir, TOLLGATE_SCHEMA: schema, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  child.stderr!.on('data', (d) => {
    out += d;
  });
  const started = await new Promise<{ baseUrl: string; key: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${out}`)), 60_000);
    const wantKey = env.TOLLGATE_BOOTSTRAP !== 'off';
    const check = () => {
      const base = /base URL: (\S+)/.exec(out)?.[1];
      const key = /(sk_svc_[A-Za-z0-9]+)/.exec(out)?.[1] ?? '';
      if (base && (key || !wantKey)) {
        clearTimeout(timer);
        resolve({ baseUrl: base, key });
      }
    };
    child.stdout!.on('data', check);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited ${code}:\n${out}`));
    });
  });
  return {
    ...started,
    child,
    output: () => out,
    async stop(signal = 'SIGTERM') {
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill(signal);
      const code = await exited;
      rmSync(dataDir, { recursive: true, force: true });
      if (process.env.DATABASE_URL) await dropSchemas(process.env.DATABASE_URL, schema);
      return code;
    },
  };
}

/** `tollgate projector` on `schema`, as a user starts it; `running` resolves once it says so. */
export function spawnProjector(schema: string, opts: { logLevel?: string } = {}): { child: ChildProcess; running: Promise<void>; waiting: Promise<void> } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'projector'], {
    cwd: new URL('../..', import.meta.url).pathname,
    env: { ...process.env, TOLLGATE_SCHEMA: schema, LOG_LEVEL: opts.logLevel ?? 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const awaited: Array<{ text: string; resolve: () => void }> = [];
  child.stdout!.on('data', (d) => {
    out += d;
    for (const a of awaited) if (out.includes(a.text)) a.resolve();
  });
  const seen = (text: string) => new Promise<void>((resolve) => awaited.push({ text, resolve }));
  // `waiting`: started and asking for the lease (said at LOG_LEVEL info).
  return { child, running: seen('projector running'), waiting: seen('projector waiting for the lease') };
}
