// Two or more gateway processes and a projector on one PostgreSQL schema, for the replica-agreement
// tests: the processes started as a user starts them, a request helper that names the gateway it
// asked, the sign-in links a gateway without SMTP prints to its console, and the log itself (read
// through the admin API's event export) to check what was really written.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { dropSchemas, spawnGateway, spawnProjector, type GatewayProcess } from './gateway.ts';
import { call, type Reply } from './http.ts';
import { uniqueSchema } from './db.ts';

/** One gateway process as a test speaks to it. */
export interface Replica {
  name: string;
  /** The origin (http://127.0.0.1:port), without /v1. */
  url: string;
  process: GatewayProcess;
}

export interface ReplicaSet {
  schema: string;
  replicas: Replica[];
  adminToken: string;
  stop(): Promise<void>;
}

/**
 * A projector on a fresh schema, then `names.length` gateways on it (projections off in each, so
 * the read models are the projector's only). `env` is added to every gateway's environment (and
 * `envOf(name)` to one's), and `models` (a models config object) is written to a file they all load.
 */
export async function startReplicas(opts: {
  names: string[];
  adminToken: string;
  env?: Record<string, string>;
  /** Settings of one gateway only (say a DATABASE_URL through a fault proxy), added after `env`. */
  envOf?: (name: string) => Record<string, string>;
  models?: Record<string, unknown>;
}): Promise<ReplicaSet> {
  const schema = uniqueSchema('ra');
  const projectors: ChildProcess[] = [];
  const configDir = mkdtempSync(join(tmpdir(), 'tollgate-replicas-'));
  const env: Record<string, string> = {
    TOLLGATE_SCHEMA: schema,
    TOLLGATE_PROJECTIONS: 'off',
    TOLLGATE_ADMIN_TOKEN: opts.adminToken,
    TOLLGATE_BOOTSTRAP: 'off',
    ...(opts.env ?? {}),
  };
  if (opts.models) {
    const file = join(configDir, 'models.json');
    writeFileSync(file, JSON.stringify(opts.models));
    env.TOLLGATE_MODELS_CONFIG = file;
  }
  const replicas: Replica[] = [];
  const stop = async () => {
    await Promise.all(replicas.map((r) => r.process.stop()));
    for (const p of projectors) p.kill('SIGTERM');
    if (process.env.DATABASE_URL) await dropSchemas(process.env.DATABASE_URL, schema);
    rmSync(configDir, { recursive: true, force: true });
  };
  try {
    const projector = spawnProjector(schema);
    projectors.push(projector.child);
    await projector.running;
    // One after the other: the first creates the schema's tables, and the machine has few cores.
    for (const name of opts.names) {
      const gateway = await spawnGateway({ ...env, ...(opts.envOf?.(name) ?? {}) });
      replicas.push({ name, url: gateway.baseUrl.replace(/\/v1\/?$/, ''), process: gateway });
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { schema, replicas, adminToken: opts.adminToken, stop };
}

/** The models config the gateways load by default (config/models.json), to add channels to. */
export function defaultModelsConfig(): Record<string, any> {
  const base = JSON.parse(readFileSync(new URL('../../config/models.json', import.meta.url), 'utf8'));
  delete base.$schema;
  return base;
}

/** A reply, with the gateway that gave it named in every message built from it. */
export interface NamedReply extends Reply {
  from: string;
  /** "<gateway> <status> <body>", for assertion messages. */
  show: string;
}

function named(r: Replica, reply: Reply): NamedReply {
  return { ...reply, from: r.name, show: `gateway ${r.name} answered ${reply.status} ${reply.text.slice(0, 600)}` };
}

/** An admin API call (/admin/v1 + path) on one gateway. */
export async function adminCall(r: Replica, token: string, method: string, path: string, body?: unknown): Promise<NamedReply> {
  return named(
    r,
    await call(r, `/admin/v1${path}`, {
      method,
      body,
      headers: { authorization: `Bearer ${token}`, 'x-tollgate-actor': 'replica-test' },
    }),
  );
}

/** Any request on one gateway (path from the origin, e.g. /v1/chat/completions). */
export async function request(
  r: Replica,
  path: string,
  opts: { method?: string; key?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<NamedReply> {
  return named(r, await call(r, path, { method: opts.method, key: opts.key ?? null, body: opts.body, raw: opts.raw, headers: opts.headers }));
}

/** One small chat completion with an API key. */
export function chatOn(r: Replica, key: string, model: string, content = 'Say hello.', maxTokens = 16): Promise<NamedReply> {
  return request(r, '/v1/chat/completions', { key, body: { model, messages: [{ role: 'user', content }], max_tokens: maxTokens } });
}

/**
 * The newest sign-in link a gateway without SMTP printed for `email` after `after` characters of its
 * output (the link is sent in the background after the 202): its address and token.
 */
export async function signInLinkFrom(r: Replica, email: string, after: number, boundMs = 10_000): Promise<{ email: string; token: string }> {
  const until = Date.now() + boundMs;
  for (;;) {
    const out = r.process.output().slice(after);
    const links = [...out.matchAll(/sign-in link for (\S+) \(no TOLLGATE_SMTP_URL[^)]*\): (https?:\/\/[^\s"\\]+)/g)].filter((m) => m[1] === email);
    const last = links.at(-1);
    if (last) {
      const fragment = new URLSearchParams(new URL(last[2]).hash.slice(1));
      return { email: fragment.get('email')!, token: fragment.get('token')! };
    }
    if (Date.now() > until) throw new Error(`no sign-in link for ${email} in gateway ${r.name}'s output:\n${out.slice(-2000)}`);
    await sleep(50);
  }
}

/** The session cookie (name=value) a reply set, or ''. */
export const sessionCookieOf = (reply: Reply): string => /tollgate_session=[^;]+/.exec(reply.headers.get('set-cookie') ?? '')?.[0] ?? '';

export interface LoggedEvent {
  type: string;
  stream: string;
  revision: number;
  position: number;
  data: Record<string, any>;
  metadata: { actor?: string };
}

/** Every event of one stream as the log holds it (the admin API's NDJSON export, read in full). */
export async function streamEvents(r: Replica, token: string, stream: string): Promise<LoggedEvent[]> {
  const res = await fetch(`${r.url}/admin/v1/events`, { headers: { authorization: `Bearer ${token}` } });
  if (res.status !== 200) throw new Error(`GET /admin/v1/events on ${r.name}: ${res.status} ${await res.text()}`);
  const text = await res.text();
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as LoggedEvent)
    .filter((e) => e.stream === stream);
}
