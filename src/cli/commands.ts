// The operator commands: each maps to one admin API call and prints a line or JSON.
import { createWriteStream } from 'node:fs';
import cliProgress from 'cli-progress';
import { adminClient, CliError } from './admin-client.ts';

export interface Parsed { positionals: string[]; values: Record<string, string | boolean | undefined> }

type Out = (human: string, data: unknown) => void;

const need = (v: string | boolean | undefined, name: string): string => {
  if (typeof v !== 'string' || v === '') throw new CliError(`Missing --${name}.`, 2);
  return v;
};
const arg = (p: string[], i: number, name: string): string => {
  if (!p[i]) throw new CliError(`Missing <${name}>.`, 2);
  return p[i];
};
const int = (v: string | boolean | undefined, name: string): number => {
  const s = need(v, name);
  if (!/^-?\d+$/.test(s)) throw new CliError(`--${name} must be a whole number, got '${s}'.`, 2);
  return Number(s);
};
const num = (v: string | boolean | undefined, name: string): number => {
  const n = Number(need(v, name));
  if (!Number.isFinite(n)) throw new CliError(`--${name} must be a number.`, 2);
  return n;
};

export const COMMAND_HELP = `tollgate <command> [options]

  serve                                   run the gateway (default)
  projector                               run the projections as their own process (PostgreSQL)
  plan define <id> --name N --quota T --validity-days D --rpm R --models a,b|*
  plan update <id> (same options)         change a plan for future subscriptions
  plan list
  account open --name N [--id ID]         open an account
  account show <id>
  subscribe <account> --plan <plan>       start or renew the account's main plan
  grant <account> --amount T [--reason R] add extra tokens
  key issue <account> [--name N]          the secret is printed once
  key list <account>                      masked, with last use
  key revoke <key-id> [--reason R]
  model set <id> [--multiplier M] [--status ACTIVE|INACTIVE] [--alias A|--no-alias]
  model list
  correct --model M --from ISO --to ISO --multiplier X [--reason R] [--dry-run]
  statement <account> --from ISO --to ISO [--format csv|json]
  verify                                  hash chains + read models vs a rebuild
  export [--out FILE]                     every event as NDJSON
  replay                                  rebuild the read models (progress bar)
  sweep                                   release expired holds now

Options: --url URL (TOLLGATE_URL), --token T (TOLLGATE_ADMIN_TOKEN or <data dir>/admin-token),
         --actor NAME (recorded in events), --json`;

export async function runAdminCommand(p: Parsed, out: Out): Promise<void> {
  const v = p.values;
  const [cmd, sub] = p.positionals;
  const c = adminClient({ url: v.url as string | undefined, token: v.token as string | undefined, actor: v.actor as string | undefined });
  const planBody = () => ({
    name: need(v.name, 'name'), quota: int(v.quota, 'quota'), validity_days: int(v['validity-days'], 'validity-days'),
    requests_per_minute: int(v.rpm, 'rpm'), models: need(v.models, 'models').split(',').map((s) => s.trim()).filter(Boolean),
  });
  switch (`${cmd} ${sub ?? ''}`.trim()) {
    case 'plan define': {
      const r = await c.json('POST', '/plans', { plan_id: arg(p.positionals, 2, 'id'), ...planBody() });
      return out(`plan ${r.planId} defined`, r);
    }
    case 'plan update': {
      const r = await c.json('PUT', `/plans/${encodeURIComponent(arg(p.positionals, 2, 'id'))}`, planBody());
      return out(`plan ${r.planId} updated`, r);
    }
    case 'plan list': {
      const r = await c.json<{ data: Array<Record<string, unknown>> }>('GET', '/plans');
      return out(r.data.map((x) => `${x.plan_id}\t${x.name}\tquota=${x.quota}\tdays=${x.validity_days}\trpm=${x.requests_per_minute}\tmodels=${(x.models as string[]).join(',')}`).join('\n'), r);
    }
    case 'account open': {
      const r = await c.json('POST', '/accounts', { name: need(v.name, 'name'), ...(v.id ? { account_id: v.id } : {}) });
      return out(`account ${r.account_id} opened`, r);
    }
    case 'account show': {
      const r = await c.json('GET', `/accounts/${encodeURIComponent(arg(p.positionals, 2, 'id'))}`);
      return out(Object.entries(r).map(([k, x]) => `${k}: ${typeof x === 'object' ? JSON.stringify(x) : x}`).join('\n'), r);
    }
    case `subscribe ${sub}`: {
      const r = await c.json('POST', `/accounts/${encodeURIComponent(arg(p.positionals, 1, 'account'))}/subscription`, { plan_id: need(v.plan, 'plan') });
      return out(`${r.event === 'SubscriptionRenewed' ? 'renewed' : 'subscribed'}: ${r.accountId} on ${r.planId} until ${r.expiresAt}`, r);
    }
    case `grant ${sub}`: {
      const r = await c.json('POST', `/accounts/${encodeURIComponent(arg(p.positionals, 1, 'account'))}/extra-tokens`, { amount: int(v.amount, 'amount'), reason: (v.reason as string) ?? '' });
      return out(`granted ${r.granted} extra tokens to ${r.account_id}`, r);
    }
    case 'key issue': {
      const r = await c.json('POST', `/accounts/${encodeURIComponent(arg(p.positionals, 2, 'account'))}/keys`, { name: (v.name as string) ?? 'default' });
      return out(`key ${r.key_id} issued. Secret (shown once, store it now):\n${r.key}`, r);
    }
    case 'key list': {
      const r = await c.json<{ data: Array<Record<string, unknown>> }>('GET', `/accounts/${encodeURIComponent(arg(p.positionals, 2, 'account'))}/keys`);
      return out(r.data.map((k) => `${k.key_id}\t${k.masked}\t${k.status}\t${k.name}\tlast used: ${k.last_used_at ?? 'never'}`).join('\n'), r);
    }
    case 'key revoke': {
      const r = await c.json('POST', `/keys/${encodeURIComponent(arg(p.positionals, 2, 'key-id'))}/revoke`, { reason: (v.reason as string) ?? '' });
      return out(`key ${r.key_id} revoked`, r);
    }
    case 'model set': {
      const body: Record<string, unknown> = {};
      if (v.multiplier !== undefined) body.multiplier = num(v.multiplier, 'multiplier');
      if (v.status !== undefined) body.status = v.status;
      if (v.alias !== undefined) body.alias = v.alias;
      if (v['no-alias']) body.alias = null;
      const r = await c.json('PATCH', `/models/${encodeURIComponent(arg(p.positionals, 2, 'id'))}`, body);
      return out(`model ${r.modelId}: multiplier ${(r.multiplierMilli as number) / 1000}, ${r.status}, alias ${r.alias ?? '-'}`, r);
    }
    case 'model list': {
      const r = await c.json<{ data: Array<Record<string, unknown>> }>('GET', '/models');
      return out(r.data.map((m) => `${m.model_id}\t${(m.multiplier_milli as number) / 1000}\t${m.status}\t${m.alias ?? ''}`).join('\n'), r);
    }
    case 'correct': {
      const r = await c.json<Record<string, unknown> & { accounts: Array<Record<string, number | string>>; totals: Record<string, number> }>('POST', '/corrections', {
        model: need(v.model, 'model'), from: need(v.from, 'from'), to: need(v.to, 'to'), multiplier: num(v.multiplier, 'multiplier'), reason: (v.reason as string) ?? '', dry_run: !!v['dry-run'],
      });
      const lines = r.accounts.map((a) => `${a.accountId}\tcharges=${a.charges}\tbilled=${a.billed}\tcorrected=${a.corrected}\tdifference=${a.difference}`);
      lines.push(`total\tcharges=${r.totals.charges}\tbilled=${r.totals.billed}\tcorrected=${r.totals.corrected}\tdifference=${r.totals.difference}`);
      lines.push(r.dry_run ? 'dry run: nothing was written' : `applied: ${r.appended} adjustments appended, ${r.already_applied} already applied`);
      return out(lines.join('\n'), r);
    }
    case `statement ${sub}`: {
      const q = new URLSearchParams({ from: need(v.from, 'from'), to: need(v.to, 'to'), format: v.format === 'csv' ? 'csv' : 'json' });
      const res = await c.request('GET', `/accounts/${encodeURIComponent(arg(p.positionals, 1, 'account'))}/statement?${q}`);
      const text = await res.text();
      if (v.format === 'csv') { process.stdout.write(text); return; }
      const s = JSON.parse(text);
      return out(`${s.lines.length} lines; charges ${s.totals.billed}, adjustments ${s.totals.adjusted}, net ${s.totals.net}`, s);
    }
    case 'verify': {
      const r = await c.json<{ ok: boolean; events: number; streams: number; chainProblems: unknown[]; readModelDifferences: unknown[] }>('POST', '/verify');
      const human = r.ok
        ? `ok: ${r.events} events in ${r.streams} streams; every hash chain verifies and every read model equals a rebuild`
        : `FAILED:\n${r.chainProblems.map((x) => `chain: ${JSON.stringify(x)}`).concat(r.readModelDifferences.map((x) => `read model: ${JSON.stringify(x)}`)).join('\n')}`;
      out(human, r);
      if (!r.ok) throw new CliError('verification failed', 3);
      return;
    }
    case 'export': {
      const res = await c.request('GET', '/events', undefined, 'application/x-ndjson');
      const sink = v.out ? createWriteStream(v.out as string) : process.stdout;
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) sink.write(chunk);
      if (v.out) await new Promise((r) => (sink as ReturnType<typeof createWriteStream>).end(r));
      return;
    }
    case 'replay': {
      const res = await c.request('POST', '/rebuild', undefined, 'application/x-ndjson');
      const bar = v.json ? null : new cliProgress.SingleBar({ format: 'replay |{bar}| {percentage}% {value}/{total} events | {speed} events/s | ETA {eta_formatted}', hideCursor: true }, cliProgress.Presets.shades_classic);
      let started = false;
      let buffered = '';
      let final: Record<string, unknown> | null = null;
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffered += Buffer.from(chunk).toString('utf8');
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const msg = JSON.parse(buffered.slice(0, nl));
          buffered = buffered.slice(nl + 1);
          if (msg.type === 'progress' && bar) {
            const speed = msg.elapsedMs > 0 ? Math.round((msg.events * 1000) / msg.elapsedMs) : 0;
            if (!started) { bar.start(Math.max(msg.head, msg.position), msg.position, { speed }); started = true; }
            bar.setTotal(Math.max(msg.head, msg.position));
            bar.update(msg.position, { speed });
          } else if (msg.type === 'done') final = msg;
          else if (msg.type === 'error') { bar?.stop(); throw new CliError(`replay failed: ${msg.message}`); }
        }
      }
      bar?.stop();
      if (!final) throw new CliError('replay ended without completing');
      return out(`replayed ${final.events} events; read models swapped in`, final);
    }
    case 'sweep': {
      const r = await c.json('POST', '/sweep');
      return out(`released ${r.released} expired holds`, r);
    }
    default:
      throw new CliError(`Unknown command '${p.positionals.join(' ')}'.\n\n${COMMAND_HELP}`, 2);
  }
}
