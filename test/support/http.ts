// Small helpers for gateway tests over real HTTP: calls with a key, accounts set up through the
// ledger, and what the ledger holds for an account (charges, holds, the accounts read model).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { startTestGateway, type TestGateway } from './gateway.ts';
import { randomBytes } from 'node:crypto';
import type { RunningGateway } from '../../src/server.ts';
import type { StoredEvent } from '../../src/eventstore/port.ts';
import { priceModel } from '../../src/catalogue/index.ts';
import { issueKey } from '../../src/keys/index.ts';
import { definePlan, grantExtra, openAccount as openLedgerAccount, subscribe } from '../../src/accounts/index.ts';

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed JSON body, or null when the body is not JSON. */
  json: any;
}

export interface CallOptions {
  method?: string;
  key?: string | null;
  body?: unknown;
  /** Sent as is (no JSON encoding, no content-type unless given in headers). */
  raw?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** One request to the gateway; `path` is relative to the origin (e.g. /v1/chat/completions). */
export async function call(gw: { url: string }, path: string, opts: CallOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(gw.url + path, { method: opts.method ?? (body === undefined ? 'GET' : 'POST'), headers, body, signal: opts.signal });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, text, json };
}

export const chat = (gw: { url: string }, key: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  call(gw, '/v1/chat/completions', { key, body, headers });

export const userMessage = (content: string) => [{ role: 'user', content }];

export interface TestAccount {
  accountId: string;
  planId: string;
  keyId: string;
  key: string;
}

/** A plan of its own, an account subscribed to it and a key, straight through the ledger. */
export async function openAccount(
  gw: RunningGateway,
  terms: {
    quota: number;
    requestsPerMinute?: number;
    models?: string[];
    validityDays?: number;
    subscribedAt?: Date;
    extra?: number;
  },
): Promise<TestAccount> {
  const id = randomBytes(5).toString('hex');
  const planId = `plan_${id}`;
  await definePlan(
    gw.ledger,
    {
      planId,
      name: `Plan ${id}`,
      quota: terms.quota,
      validityDays: terms.validityDays ?? 30,
      requestsPerMinute: terms.requestsPerMinute ?? 10_000,
      models: terms.models ?? ['*'],
    },
    'admin:test',
  );
  const accountId = await openLedgerAccount(gw.ledger, { accountId: `acct_${id}`, name: `Account ${id}` }, 'admin:test');
  await subscribe(gw.ledger, accountId, planId, 'admin:test', terms.subscribedAt ?? new Date());
  if (terms.extra) await grantExtra(gw.ledger, accountId, terms.extra, 'test top-up', 'admin:test');
  const key = await issueKey(gw.ledger, accountId, 'test key', 'admin:test');
  await gw.ledger.caughtUp();
  return { accountId, planId, keyId: key.keyId, key: key.secret };
}

export interface AccountRowView {
  quota_total: number;
  quota_used: number;
  reserved: number;
  open_holds: number;
  extra_granted: number;
  extra_used: number;
}

export interface LedgerView {
  events: StoredEvent[];
  chatCharges: StoredEvent[];
  imageCharges: StoredEvent[];
  reservations: StoredEvent[];
  releases: StoredEvent[];
  /** Sum of `billed` over the account's chat and image charges. */
  billed: number;
  row: AccountRowView;
  /** Rows left in the holds read model for the account. */
  openHoldRows: number;
}

/** Everything the ledger says about one account, after the read models caught up. */
export async function ledgerView(gw: RunningGateway, accountId: string): Promise<LedgerView> {
  await gw.ledger.caughtUp();
  const all = await gw.ledger.events.readAll(0, 100_000);
  // The read models must include at least the events read here (a call may settle meanwhile).
  const last = all.length ? all[all.length - 1].position : 0;
  if (!(await gw.ledger.waitForPosition(last, 5000))) throw new Error(`read models did not reach position ${last}`);
  const events = all.filter((e) => e.data.accountId === accountId);
  const of = (type: string) => events.filter((e) => e.type === type);
  const chatCharges = of('ChatCharged');
  const imageCharges = of('ImageCharged');
  const [row] = await gw.db.query<Record<string, unknown>>(
    `SELECT quota_total, quota_used, reserved, open_holds, extra_granted, extra_used FROM "${gw.ledger.rmSchema}".accounts WHERE account_id = $1`,
    [accountId],
  );
  const [holds] = await gw.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${gw.ledger.rmSchema}".holds WHERE account_id = $1`, [accountId]);
  return {
    events,
    chatCharges,
    imageCharges,
    reservations: of('QuotaReserved'),
    releases: of('ReservationReleased'),
    billed: [...chatCharges, ...imageCharges].reduce((sum, e) => sum + Number(e.data.billed), 0),
    row: Object.fromEntries(Object.entries(row ?? {}).map(([k, v]) => [k, Number(v)])) as unknown as AccountRowView,
    openHoldRows: Number(holds?.n ?? 0),
  };
}

/** Waits (bounded) until `check` passes; returns its last value. */
export async function eventually<T>(fn: () => Promise<T>, check: (v: T) => boolean, timeoutMs = 5000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (check(v) || Date.now() > until) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface ExtraRoute {
  provider: string;
  upstreamModel: string;
  multiplierMilli: number;
}

/** One channel of a model that has several (tried in order, or by weight when weights are given). */
export interface ExtraChannel {
  provider: string;
  upstreamModel: string;
  weight?: number;
  id?: string;
}

/** A priced model routed to several channels, with failover between them. */
export interface ExtraChannelsRoute {
  channels: ExtraChannel[];
  multiplierMilli: number;
}

export interface GatewayRoutesOptions {
  /** The circuit breaker policy of every channel (the models config's top-level `failover`). */
  failover?: { failureThreshold?: number; coolDownMs?: number };
  /** Upstream keys by the variable names the providers' apiKeyEnv give (looked up before process.env). */
  env?: Record<string, string>;
}

/**
 * A test gateway whose models config is the default plus extra providers and priced models
 * (e.g. an upstream double), each on one provider or on several channels; stop() also removes
 * the temporary config.
 */
export async function startGatewayWithRoutes(
  providers: Record<string, unknown>,
  models: Record<string, ExtraRoute | ExtraChannelsRoute>,
  options: GatewayRoutesOptions = {},
): Promise<TestGateway> {
  const config = JSON.parse(readFileSync(new URL('../../config/models.json', import.meta.url), 'utf8'));
  delete config.$schema;
  Object.assign(config.providers, providers);
  for (const [id, m] of Object.entries(models)) {
    config.models[id] = 'channels' in m ? { channels: m.channels } : { provider: m.provider, upstreamModel: m.upstreamModel };
  }
  if (options.failover) config.failover = options.failover;
  const secrets: Record<string, string | undefined> = { ...options.env };
  const path = writeModelsConfig(config);
  const gw = await startTestGateway({ modelsConfig: path, upstreamSecret: (variable) => secrets[variable] ?? (process.env[variable] || undefined) });
  for (const [modelId, m] of Object.entries(models)) {
    await priceModel(gw.ledger, { modelId, multiplierMilli: m.multiplierMilli, status: 'ACTIVE', alias: null }, 'admin:test');
  }
  await gw.ledger.caughtUp();
  return {
    ...gw,
    async stop() {
      await gw.stop();
      rmSync(dirname(path), { recursive: true, force: true });
    },
  };
}

/** Writes a models config to a temp file and returns its path (for startTestGateway's modelsConfig). */
export function writeModelsConfig(config: {
  providers: Record<string, unknown>;
  models: Record<string, { provider: string; upstreamModel: string } | { channels: ExtraChannel[] }>;
  failover?: GatewayRoutesOptions['failover'];
}): string {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-models-'));
  const path = join(dir, 'models.json');
  writeFileSync(path, JSON.stringify(config));
  return path;
}

/** Reads an SSE response body: every `data:` payload (JSON parsed, except [DONE]). */
export async function readSse(res: Response): Promise<unknown[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .map((block) =>
      block
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n'),
    )
    .filter(Boolean)
    .map((d) => (d === '[DONE]' ? d : JSON.parse(d)));
}

/** A port nothing listens on (connections are refused): an upstream that is down. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
