// Gateway and projector processes that can be killed and restarted on the same storage: the same
// PostgreSQL schema or PGlite data directory and the same port, so clients keep their base URL.
// (test/support/gateway.ts spawnGateway gives each start fresh storage; a crash test needs the
// opposite.)
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';

const ROOT = new URL('../../..', import.meta.url).pathname;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface ManagedProcess {
  readonly pid: number;
  readonly child: ChildProcess;
  output(): string;
  /** Resolves with the exit code or signal name once the process is gone. */
  readonly exited: Promise<string>;
}

/** Every child still running, so an interrupted scenario can take them down with it. */
const live = new Set<ChildProcess>();

export function killAllChildren(): void {
  for (const c of live) c.kill('SIGKILL');
}

function launch(args: string[], env: Record<string, string>, ready: RegExp, timeoutMs: number): Promise<ManagedProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (d: Buffer) => {
    out += d;
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  live.add(child);
  const exited = new Promise<string>((r) =>
    child.once('exit', (code, signal) => {
      live.delete(child);
      r(signal ?? String(code));
    }),
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${args[0]} did not start in ${timeoutMs} ms:\n${out.slice(-4000)}`));
    }, timeoutMs);
    const check = () => {
      if (ready.test(out)) {
        clearTimeout(timer);
        child.stdout!.off('data', check);
        resolve({ pid: child.pid!, child, output: () => out, exited });
      }
    };
    child.stdout!.on('data', check);
    void exited.then((how) => {
      clearTimeout(timer);
      reject(new Error(`${args[0]} exited (${how}) before it was ready:\n${out.slice(-4000)}`));
    });
  });
}

export interface GatewaySpec {
  port: number;
  schema: string;
  /** PostgreSQL URL; unset runs embedded PGlite in dataDir. */
  databaseUrl?: string;
  dataDir: string;
  adminToken: string;
  modelsConfig?: string;
  projections?: boolean;
  env?: Record<string, string>;
}

export function gatewayEnv(spec: GatewaySpec): Record<string, string> {
  return {
    PORT: String(spec.port),
    HOST: '127.0.0.1',
    TOLLGATE_SCHEMA: spec.schema,
    TOLLGATE_DATA_DIR: spec.dataDir,
    DATABASE_URL: spec.databaseUrl ?? '',
    TOLLGATE_ADMIN_TOKEN: spec.adminToken,
    TOLLGATE_BOOTSTRAP: 'off',
    TOLLGATE_PROJECTIONS: spec.projections === false ? 'off' : 'on',
    ...(spec.modelsConfig ? { TOLLGATE_MODELS_CONFIG: spec.modelsConfig } : {}),
    ...(spec.env ?? {}),
  };
}

/** `tollgate serve` on the spec's storage and port; resolves once it prints its base URL. */
export function startGatewayProcess(spec: GatewaySpec, timeoutMs = 120_000): Promise<ManagedProcess> {
  return launch(['serve'], gatewayEnv(spec), /base URL: \S+/, timeoutMs);
}

/** `tollgate projector` on the spec's schema (PostgreSQL only). */
export function startProjectorProcess(spec: GatewaySpec, timeoutMs = 120_000): Promise<ManagedProcess> {
  return launch(['projector'], gatewayEnv(spec), /projector running/, timeoutMs);
}

/** kill -9, and wait until the process is really gone (its port and PGlite files are free). */
export async function kill9(p: ManagedProcess): Promise<void> {
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await p.exited;
}

/** SIGTERM (graceful: in-flight calls finish and settle), then SIGKILL after graceMs. */
export async function stopGracefully(p: ManagedProcess, graceMs = 60_000): Promise<string> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return p.exited;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
  const how = await p.exited;
  clearTimeout(timer);
  return how;
}

/** Resident set size of a process in bytes (Linux /proc), or null once it is gone. */
export function rssBytes(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** CPU time (user + system) a process has used, in seconds (Linux /proc), or null once it is gone. */
export function cpuSeconds(pid: number): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

/** Waits until GET /healthz answers 200 (the listener is up). */
export async function waitHealthy(baseOrigin: string, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      const r = await fetch(`${baseOrigin}/healthz`);
      await r.arrayBuffer();
      if (r.ok) return;
    } catch {
      /* not up yet */
    }
    if (Date.now() > until) throw new Error(`${baseOrigin} not healthy after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
