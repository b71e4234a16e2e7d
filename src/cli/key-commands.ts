// `tollgate key set` and `tollgate key rotate`: a key's controls and its rotation (admin API
// PATCH /keys/:id and POST /keys/:id/rotate).
import { CliError, type AdminClient } from './admin-client.ts';

/** The parsed command line (commands.ts's Parsed). */
interface Parsed {
  positionals: string[];
  values: Record<string, string | boolean | undefined>;
}

type Out = (human: string, data: unknown) => void;

const PERIODS = ['none', 'daily', 'weekly', 'monthly'];

/** The PATCH body from the options: --name, --limit T|none with --period, --models a,b|all, --expires ISO|never. */
export function keySetBody(v: Parsed['values']): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const str = (name: string): string | undefined => {
    const x = v[name];
    if (x === undefined) return undefined;
    if (typeof x !== 'string' || x === '') throw new CliError(`--${name} needs a value.`, 2);
    return x;
  };
  const name = str('name');
  if (name !== undefined) body.name = name;
  const limit = str('limit');
  const period = str('period');
  if (limit === 'none') {
    if (period !== undefined) throw new CliError('--period goes with a numeric --limit, not with --limit none.', 2);
    body.spend_limit = null;
  } else if (limit !== undefined) {
    if (!/^\d+$/.test(limit)) throw new CliError(`--limit must be a whole number of billed tokens (or none), got '${limit}'.`, 2);
    if (period === undefined) throw new CliError(`--limit needs --period (${PERIODS.join(', ')}).`, 2);
    body.spend_limit = { tokens: Number(limit), period };
  } else if (period !== undefined) throw new CliError('--period needs --limit.', 2);
  const models = str('models');
  if (models !== undefined)
    body.models =
      models === 'all'
        ? null
        : models
            .split(',')
            .map((m) => m.trim())
            .filter(Boolean);
  const expires = str('expires');
  if (expires !== undefined) body.expires_at = expires === 'never' ? null : expires;
  if (Object.keys(body).length === 0) throw new CliError('Nothing to set: give --name, --limit (with --period), --models or --expires.', 2);
  return body;
}

function describe(r: Record<string, unknown>): string {
  const l = r.spend_limit as { tokens: number; period: string } | null;
  return [
    `name: ${r.name}`,
    `spend limit: ${l ? `${l.tokens} billed tokens${l.period === 'none' ? ' in all' : ` ${l.period} (UTC)`}` : 'none'}`,
    `models: ${(r.models as string[] | null)?.join(',') ?? 'every model of the plan'}`,
    `expires: ${r.expires_at ?? 'never'}`,
  ].join('\n');
}

export async function runKeyCommand(sub: 'set' | 'rotate', p: Parsed, c: AdminClient, out: Out): Promise<void> {
  const id = p.positionals[2];
  if (!id) throw new CliError('Missing <key-id>.', 2);
  const path = `/keys/${encodeURIComponent(id)}`;
  if (sub === 'set') {
    const r = await c.json<Record<string, unknown>>('PATCH', path, keySetBody(p.values));
    const changed = r.changed as string[];
    return out(`key ${r.key_id}: ${changed.length ? `changed ${changed.join(', ')}` : 'unchanged'}\n${describe(r)}`, r);
  }
  const grace = p.values.grace;
  if (grace !== undefined && (typeof grace !== 'string' || !/^\d+$/.test(grace)))
    throw new CliError(`--grace must be a whole number of seconds, got '${String(grace)}'.`, 2);
  const r = await c.json<Record<string, unknown> & { replaces: { key_id: string; revoke_at: string } }>(
    'POST',
    `${path}/rotate`,
    grace === undefined ? {} : { grace_seconds: Number(grace) },
  );
  return out(`key ${r.key_id} replaces ${r.replaces.key_id}, which works until ${r.replaces.revoke_at}. Secret (shown once, store it now):\n${r.key}`, r);
}
