// The database's faults under traffic: a real `tollgate serve` process whose DATABASE_URL points
// at a TCP proxy (tcp-proxy.ts) in front of PostgreSQL, clients sending chat calls and streams
// over real HTTP, a prober on /readyz, and the audit of what the ledger holds afterwards. Used by
// test/db-faults.test.ts (CI) and test/stress/db-cut.ts (the 12-run crash rate).
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';
import { uniqueSchema } from './db.ts';
import { adminClient, exportEvents, openLoadAccount, type AdminClient, type LoadAccount } from '../stress/support/admin.ts';
import { writeSlowSimulatedConfig } from '../stress/support/models.ts';
import type { StoredEvent } from '../../src/eventstore/port.ts';

export const FAULT_MODEL = 'gen-6-terra';

export interface FaultRig {
  proxy: TcpProxy;
  child: ChildProcess;
  origin: string;
  baseUrl: string;
  admin: AdminClient;
  account: LoadAccount;
  schema: string;
  output(): string;
  /** null while the process runs; its exit code or signal once it ended. */
  exited(): string | null;
  stop(): Promise<void>;
}

/**
 * A gateway process on the database at `pg` (host:port of PostgreSQL), reached through a proxy.
 * `cwd`: the checkout to run (another one measures older code); `env`: settings for it.
 */
export async function startFaultRig(opts: {
  pg: URL;
  env?: Record<string, string>;
  cwd?: string;
  tokenDelayMs?: number;
  /** Projections in a `tollgate projector` process of their own (the gateway's are off). */
  projector?: boolean;
}): Promise<FaultRig> {
  const proxy = await startTcpProxy(Number(opts.pg.port || 5432), opts.pg.hostname);
  const viaProxy = new URL(opts.pg.href);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(proxy.port);
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-faults-'));
  const schema = uniqueSchema('flt');
  const models = writeSlowSimulatedConfig({ tokenDelayMs: opts.tokenDelayMs ?? 25, imageDelayMs: 500 });
  const token = randomBytes(24).toString('hex');
  const env = {
    ...process.env,
    PORT: '0',
    DATABASE_URL: viaProxy.href,
    TOLLGATE_DATA_DIR: dataDir,
    TOLLGATE_SCHEMA: schema,
    TOLLGATE_MODELS_CONFIG: models.path,
    TOLLGATE_ADMIN_TOKEN: token,
    TOLLGATE_BOOTSTRAP: 'off',
    TOLLGATE_SWEEP_INTERVAL_MS: '1000',
    LOG_LEVEL: 'info',
    ...(opts.projector ? { TOLLGATE_PROJECTIONS: 'off' } : {}),
    ...opts.env,
  };
  const run = (command: string) =>
    spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', command], {
      cwd: opts.cwd ?? new URL('../..', import.meta.url).pathname,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  let out = '';
  // The projector's lines go to the same output, each line marked (a chunk may hold several).
  const projector = opts.projector ? run('projector') : null;
  for (const stream of projector ? [projector.stdout!, projector.stderr!] : []) {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => (out += `[projector] ${line}\n`));
  }
  let projectorExit: string | null = null;
  projector?.once('exit', (code, signal) => (projectorExit = signal ?? `exit ${code}`));
  const child = run('serve');
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  let exit: string | null = null;
  const ended = new Promise<void>((r) =>
    child.once('exit', (code, signal) => {
      exit = signal ?? `exit ${code}`;
      r();
    }),
  );
  const cleanup = async () => {
    if (projector && !projectorExit) {
      const gone = new Promise((r) => projector.once('exit', r));
      projector.kill('SIGKILL');
      await gone;
    }
    await proxy.close();
    models.remove();
    rmSync(dataDir, { recursive: true, force: true });
    await dropSchemasDirect(opts.pg, schema);
  };
  try {
    const baseUrl = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${out}`)), 90_000);
      const check = () => {
        const base = /base URL: (\S+)/.exec(out)?.[1];
        if (base) {
          clearTimeout(timer);
          resolve(base);
        }
      };
      child.stdout!.on('data', check);
      void ended.then(() => reject(new Error(`gateway exited (${exit}):\n${out}`)));
    });
    const origin = baseUrl.replace(/\/v1$/, '');
    const admin = adminClient(origin, token);
    const account = await openLoadAccount(admin, `faults-${randomUUID().slice(0, 8)}`, 1_000_000_000);
    return {
      proxy,
      child,
      origin,
      baseUrl,
      admin,
      account,
      schema,
      output: () => out,
      exited: () => exit ?? (projectorExit ? `projector ${projectorExit}` : null),
      async stop() {
        if (!exit) {
          child.kill('SIGKILL');
          await ended;
        }
        await cleanup();
      },
    };
  } catch (err) {
    if (!exit) child.kill('SIGKILL');
    await cleanup();
    throw err;
  }
}

async function dropSchemasDirect(pg: URL, schema: string): Promise<void> {
  const { dropSchemas } = await import('./gateway.ts');
  await dropSchemas(pg.href, schema).catch(() => undefined);
}

/** What a client saw of one call. */
export interface CallOutcome {
  requestId: string;
  stream: boolean;
  startedAt: number;
  endedAt: number;
  status: number;
  /** A whole reply: JSON with usage, or a stream with its finish, usage and [DONE]. */
  complete: boolean;
  /** A stream that ended with an error event. */
  errorEvent: boolean;
  /** A stream that stopped with neither its end nor an error (the defect of issue 29). */
  silent: boolean;
  retryAfter: string | null;
  errorShape: boolean;
  transportError?: string;
}

export async function oneCall(baseUrl: string, key: string, stream: boolean, onFirstChunk?: () => void): Promise<CallOutcome> {
  const requestId = `flt-${randomUUID()}`;
  const startedAt = Date.now();
  const o: CallOutcome = {
    requestId,
    stream,
    startedAt,
    endedAt: 0,
    status: 0,
    complete: false,
    errorEvent: false,
    silent: false,
    retryAfter: null,
    errorShape: false,
  };
  try {
    const res = await fetch(`${baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': requestId },
      body: JSON.stringify({
        model: FAULT_MODEL,
        messages: [{ role: 'user', content: 'Say something about databases.' }],
        max_tokens: 16,
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      }),
      signal: AbortSignal.timeout(60_000),
    });
    o.status = res.status;
    o.retryAfter = res.headers.get('retry-after');
    let text = '';
    const decoder = new TextDecoder();
    for await (const chunk of res.body ?? []) {
      if (text === '') onFirstChunk?.();
      text += decoder.decode(chunk as Uint8Array, { stream: true });
    }
    if (res.status !== 200) {
      o.errorShape = typeof (JSON.parse(text) as { error?: { message?: unknown } }).error?.message === 'string';
    } else if (!stream) {
      o.complete = typeof (JSON.parse(text) as { usage?: unknown }).usage === 'object';
    } else {
      const events = text
        .split('\n\n')
        .map((b) => b.replace(/^data: /, '').trim())
        .filter(Boolean);
      const done = events.includes('[DONE]');
      const parsed = events
        .filter((e) => e !== '[DONE]')
        .map((e) => JSON.parse(e) as { error?: unknown; usage?: unknown; choices?: Array<{ finish_reason?: unknown }> });
      o.errorEvent = parsed.some((e) => e.error);
      const finished = parsed.some((e) => e.choices?.some((c) => c.finish_reason));
      const usage = parsed.some((e) => e.usage);
      o.complete = done && finished && usage && !o.errorEvent;
      o.silent = !o.complete && !o.errorEvent;
    }
  } catch (err) {
    o.transportError = (err as Error).message;
  }
  o.endedAt = Date.now();
  return o;
}

export interface Traffic {
  outcomes: CallOutcome[];
  stop(): Promise<void>;
}

/** `concurrency` closed-loop clients, half of them streaming, until stopped. */
export function startTraffic(rig: Pick<FaultRig, 'baseUrl' | 'account'>, concurrency: number): Traffic {
  const outcomes: CallOutcome[] = [];
  let running = true;
  const workers = Array.from({ length: concurrency }, async (_, i) => {
    while (running) {
      const o = await oneCall(rig.baseUrl, rig.account.key, i % 2 === 1);
      outcomes.push(o);
      // A refused connection (a dead gateway) would spin: pause after any failure.
      if (!o.complete) await sleep(100);
    }
  });
  return {
    outcomes,
    async stop() {
      running = false;
      await Promise.all(workers);
    },
  };
}

export interface Probe {
  at: number;
  status: number;
  ms: number;
  body: string;
}

/** /readyz every `everyMs`, each probe given `timeoutMs` (status 0: no answer in time). */
export function startReadyProbe(origin: string, everyMs = 500, timeoutMs = 10_000): { probes: Probe[]; stop(): Promise<void> } {
  const probes: Probe[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const at = Date.now();
      let status = 0;
      let body = '';
      try {
        const res = await fetch(`${origin}/readyz`, { signal: AbortSignal.timeout(timeoutMs) });
        status = res.status;
        body = await res.text();
      } catch {
        /* no answer */
      }
      probes.push({ at, status, ms: Date.now() - at, body });
      await sleep(everyMs);
    }
  })();
  return {
    probes,
    async stop() {
      running = false;
      await loop;
    },
  };
}

export interface FaultAudit {
  calls: number;
  succeeded: number;
  failed: number;
  /** Successful calls without exactly one charge. */
  successNotChargedOnce: string[];
  /** Failed calls left charged, net of their adjustments (a charge that committed as the connection died must be voided). */
  failedCharged: string[];
  /** Charges voided because their call failed (correction id reply_lost:<hold>). */
  voids: number;
  silentStreams: number;
  errorEvents: number;
  status500: number;
  /** Failures with a status but without Retry-After or the error shape. */
  badRefusals: number;
  /** Holds still open (not charged, not released). */
  openHolds: number;
  /** Each open hold: its id, request, where it was reserved and what the client saw of that call (to tell a failure's cause). */
  openHoldDetails: string[];
  holdsReleased: number;
  events: StoredEvent[];
}

/** Compares what the clients saw with the event log. */
export function auditFaults(outcomes: CallOutcome[], events: StoredEvent[]): FaultAudit {
  const charges = new Map<string, number>();
  // What each request is billed net: its charges plus their adjustments (a void is one, to zero).
  const net = new Map<string, number>();
  const openByHold = new Map<string, string>();
  const reservedAt = new Map<string, string>();
  let released = 0;
  let voids = 0;
  for (const e of events) {
    const d = e.data as { requestId?: string; holdId?: string; billed?: number; delta?: number; correctionId?: string };
    if (e.type === 'QuotaReserved') {
      openByHold.set(d.holdId!, d.requestId!);
      reservedAt.set(d.holdId!, `position ${e.position} at ${e.timestamp} on ${e.stream}`);
    }
    if (e.type === 'ChatCharged' || e.type === 'ImageCharged') {
      charges.set(d.requestId!, (charges.get(d.requestId!) ?? 0) + 1);
      net.set(d.requestId!, (net.get(d.requestId!) ?? 0) + d.billed!);
      openByHold.delete(d.holdId!);
    }
    if (e.type === 'ChargeAdjusted') {
      net.set(d.requestId!, (net.get(d.requestId!) ?? 0) + d.delta!);
      if (d.correctionId!.startsWith('reply_lost:')) voids++;
    }
    if (e.type === 'ReservationReleased') {
      released++;
      openByHold.delete(d.holdId!);
    }
  }
  const ok = outcomes.filter((o) => o.complete);
  const failed = outcomes.filter((o) => !o.complete);
  return {
    calls: outcomes.length,
    succeeded: ok.length,
    failed: failed.length,
    successNotChargedOnce: ok.filter((o) => charges.get(o.requestId) !== 1 || !(net.get(o.requestId)! > 0)).map((o) => o.requestId),
    failedCharged: failed.filter((o) => (net.get(o.requestId) ?? 0) !== 0).map((o) => o.requestId),
    voids,
    silentStreams: outcomes.filter((o) => o.silent).length,
    errorEvents: outcomes.filter((o) => o.errorEvent).length,
    status500: outcomes.filter((o) => o.status === 500).length,
    badRefusals: failed.filter((o) => o.status >= 500 && (o.retryAfter === null || !o.errorShape)).length,
    openHolds: openByHold.size,
    openHoldDetails: [...openByHold].map(([holdId, requestId]) => {
      const seen = outcomes.find((o) => o.requestId === requestId);
      const client = seen
        ? `client: status ${seen.status}, complete ${seen.complete}, ${seen.stream ? 'stream' : 'json'}, ${seen.endedAt - seen.startedAt} ms${seen.transportError ? `, ${seen.transportError}` : ''}`
        : 'no call of the client had that request id';
      return `hold ${holdId} (request ${requestId}) reserved at ${reservedAt.get(holdId)}; ${client}`;
    }),
    holdsReleased: released,
    events,
  };
}

/** Waits until every hold in the log is closed, or `timeoutMs` passed; the events then. */
export async function eventsOnceHoldsClosed(admin: AdminClient, timeoutMs: number): Promise<{ events: StoredEvent[]; closedAfterMs: number | null }> {
  const start = Date.now();
  for (;;) {
    const events = await exportEvents(admin).catch(() => null);
    if (events && auditFaults([], events).openHolds === 0) return { events, closedAfterMs: Date.now() - start };
    if (Date.now() - start > timeoutMs) return { events: events ?? [], closedAfterMs: null };
    await sleep(500);
  }
}

/** The time from `restoredAt` to the end of the first call started after it that succeeded. */
export function recoveryMs(outcomes: CallOutcome[], restoredAt: number): number | null {
  const first = outcomes.filter((o) => o.complete && o.startedAt >= restoredAt).sort((a, b) => a.endedAt - b.endedAt)[0];
  return first ? first.endedAt - restoredAt : null;
}
