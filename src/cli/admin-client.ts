// The CLI talks to a running gateway's admin API, so it works the same on embedded PGlite
// (one process owns the files) and on a shared PostgreSQL.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliSettingsFromEnv, type CliSettings } from '../config.ts';

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

export interface AdminClientOptions {
  url?: string;
  token?: string;
  actor?: string;
}

export function adminClient(opts: AdminClientOptions, settings: CliSettings = cliSettingsFromEnv()) {
  const base = (opts.url ?? settings.url).replace(/\/+$/, '');
  const token = opts.token ?? settings.adminToken ?? readTokenFile(settings.dataDir);
  if (!token) throw new CliError('No admin token: pass --token, set TOLLGATE_ADMIN_TOKEN, or run where the data directory holds admin-token.', 2);

  async function request(method: string, path: string, body?: unknown, accept = 'application/json'): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(`${base}/admin/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          accept,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...(opts.actor ? { 'x-tollgate-actor': opts.actor } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new CliError(`Cannot reach the gateway at ${base}: ${(err as Error).message}. Is it running (npm start)? Use --url to point elsewhere.`);
    }
    if (!res.ok) {
      const text = await res.text();
      let message = text;
      try {
        message = (JSON.parse(text) as { error: { message: string } }).error.message;
      } catch {
        /* not JSON */
      }
      throw new CliError(`${res.status}: ${message}`);
    }
    return res;
  }

  return {
    base,
    request,
    async json<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<T> {
      return (await request(method, path, body)).json() as Promise<T>;
    },
  };
}

function readTokenFile(dataDir: string): string | undefined {
  const path = join(dataDir, 'admin-token');
  return existsSync(path) ? readFileSync(path, 'utf8').trim() : undefined;
}

export type AdminClient = ReturnType<typeof adminClient>;

/** A subcommand's parsed arguments (node:util parseArgs' shape). */
export interface CliArgs {
  positionals: string[];
  values: Record<string, string | boolean | undefined>;
}
/** Prints a result: a line for people, or the data as JSON under --json. */
export type CliOut = (human: string, data: unknown) => void;

/** The positional argument `i`, named `name` in the usage error when it is missing. */
/** A required --option's value. */
export const requiredOption = (v: string | boolean | undefined, name: string): string => {
  if (typeof v !== 'string' || v === '') throw new CliError(`Missing --${name}.`, 2);
  return v;
};

export const requiredArg = (p: string[], i: number, name: string): string => {
  if (!p[i]) throw new CliError(`Missing <${name}>.`, 2);
  return p[i];
};

/**
 * A credit's terms from the options (--expires ISO or --expires-in-days N, --priority N, --models
 * a,b), as the admin API takes them; the API checks them. `expires` only where a date is meant.
 */
export function creditTermsOf(v: Record<string, string | boolean | undefined>, { withDate = true } = {}): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const number = (name: string) => {
    const s = v[name];
    if (typeof s !== 'string' || !/^\d+$/.test(s)) throw new CliError(`--${name} must be a whole number.`, 2);
    return Number(s);
  };
  if (withDate && typeof v.expires === 'string') body.expires_at = v.expires;
  if (v['expires-in-days'] !== undefined) body.expires_in_days = number('expires-in-days');
  if (v.priority !== undefined) body.priority = number('priority');
  if (typeof v.models === 'string')
    body.models = v.models
      .split(',')
      .map((m) => m.trim())
      .filter(Boolean);
  return body;
}
