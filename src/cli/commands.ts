// The operator commands: each maps to one admin API call and prints a line or JSON.
import { createWriteStream } from 'node:fs';
import cliProgress from 'cli-progress';
import { adminClient, CliError, creditTermsOf, requiredOption } from './admin-client.ts';
import { runWebhookCommand } from './webhook-commands.ts';
import { runKeyCommand } from './key-commands.ts';
import { runPaymentCommand } from './payment-commands.ts';
import { runFinanceCommand, runPeriodCommand } from './finance-commands.ts';
import { runBillingProfileCommand } from './billing-profile-commands.ts';
import { runInvoiceCommand } from './invoice-commands.ts';
import { runCostCommand } from './cost-commands.ts';
import { runFxCommand } from './fx-commands.ts';

export interface Parsed {
  positionals: string[];
  values: Record<string, string | boolean | undefined>;
}

type Out = (human: string, data: unknown) => void;

const need = requiredOption;
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
  grant <account> --amount T [--reason R] [--expires ISO | --expires-in-days N] [--priority 1-100] [--models a,b]
                                          add extra tokens (a credit: expiry, priority, scope)
  key issue <account> [--name N]          the secret is printed once
  key list <account>                      masked, with last use
  key revoke <key-id> [--reason R]
  key set <key-id> [--name N] [--limit T|none --period none|daily|weekly|monthly] [--models a,b|all] [--expires ISO|never]
                                          the key's own controls (UTC periods; weekly from Monday)
  key rotate <key-id> [--grace SECONDS]   a new key with the same controls (secret printed once); the old one works
                                          for the grace period (default 0), then is revoked
  model set <id> [--multiplier M] [--status ACTIVE|INACTIVE] [--alias A|--no-alias]
                  [--cache-read-weight W] [--cache-write-weight W]   price of a cached / cache-written prompt token (1 = plain)
  channel list                            upstream channels: state (closed, open, half_open, disabled), calls, failovers
  channel disable <id> [--reason R]       take a channel out of rotation (an event with the actor)
  channel enable <id> [--reason R]
  model list
  correct --model M --from ISO --to ISO --multiplier X [--reason R] [--dry-run]
          [--component multiplier|cache_read_weight|cache_write_weight|image_tokens --value V]
          [--also-from-now (then --to may be left out: up to now)] [--id CORRECTION-ID]
  statement <account> --from ISO --to ISO [--format csv|json]
  cost rate <channel> --input P --output P [--cache-read P] [--cache-write-5m P] [--cache-write-1h P] [--image P] [--effective-at ISO]
                                          an upstream cost rate (decimal major units per million tokens; image: per image)
  cost rates                              every cost rate set
  cost import <openai|anthropic> <channel> <file> [--format json|csv]   a provider's cost export (JSON, or CSV: a .csv file)
  cost reconcile --from ISO --to ISO [--format csv|json]   Tollgate's upstream cost against the imported bills
  fx set <CUR> --rate R --source S [--day YYYY-MM-DD]   an exchange rate into the settlement currency for a UTC day
                                          (default today): R settlement units per 1 CUR, a decimal such as 1.0523
  fx list [--currency C]                  every rate set, newest day first per currency
  upstream-report --from ISO --to ISO [--format csv|json]   per UTC day, channel and upstream model: calls, tokens, billed
  finance report --from DAY --to DAY [--format json|csv]      payments, fees, refunds, disputes, revenue, breakage per day/account/model/channel
  finance reconcile --from DAY --to DAY                       payments - refunds = revenue + refunded revenue + breakage + change in deferred
  finance journal --from DAY --to DAY [--format hledger|csv|json]   the double-entry journal
  period close YYYY-MM [--reason R]       close a month of the books (its reconciliation at 0 and its bills agreeing, or --reason to override)
  period reopen YYYY-MM --reason R        open a closed month again
  period list                             the months closed and reopened
  verify [--full]                         hash chains, read models and lots from the last checkpoint on (--full: the whole log,
                                          every read model vs a rebuild)
  export [--out FILE]                     every event as NDJSON
  replay                                  rebuild the read models (progress bar)
  sweep                                   release expired holds now
  webhook add <account> <url> [--events a,b] [--thresholds 80,90,100] [--expiring-days N]
                                          notifications by webhook; the signing secret is printed once
  webhook list <account>
  webhook remove <account> <webhook-id> [--reason R]
  webhook deliveries <webhook-id> [--status pending|delivered|failed|cancelled] [--limit N]
  webhook replay <webhook-id> <delivery-id>   send a delivery again
  price list                              the settlement currency, plan prices and packs
  price plan <plan> --amount CENTS [--currency C]
                                          a plan's price per period from now on (whole minor units; another
                                          currency than the settlement one: an offer in it)
  price pack <pack> --tokens T --amount CENTS [--name N] [--currency C] [--expires-in-days N] [--priority 1-100] [--models a,b]
  payment record <account> --reference R --amount CENTS (--plan P | --pack K) [--fee CENTS] [--currency C]
                                          a bank transfer or paid invoice, with the grant it pays for
  payment list <account>
  payment refund <account> <payment-id> --amount CENTS [--id REFUND-ID]
  payment stripe-replay [--since ISO] [--event EVT-ID]   Stripe's kept notices through today's handlers again
                                          (all, those received since, or one): handled, unchanged or failed each
  codes mint --count N (--plan P | --pack K) --amount CENTS [--expires ISO]   codes printed once
  billing-profile show <account>          who the account's invoices are made out to, and who last changed it
  billing-profile set <account> <file|->  the whole profile as JSON (legal_name, address_lines, city, postal_code,
                                          region, country, tax_id, invoice_email), from a file or standard input
  invoices list [<account>]               issued invoices and credit notes, newest first (every account's, or one's)
  invoices show <number> [--format json|html|pdf] [--out FILE]   one document (a PDF needs --out)
  unmatched list                          processor payments that matched no account or price

Options: --url URL (TOLLGATE_URL), --token T (TOLLGATE_ADMIN_TOKEN or <data dir>/admin-token),
         --actor NAME (recorded in events), --json`;

export async function runAdminCommand(p: Parsed, out: Out): Promise<void> {
  const v = p.values;
  const [cmd, sub] = p.positionals;
  const c = adminClient({ url: v.url as string | undefined, token: v.token as string | undefined, actor: v.actor as string | undefined });
  const planBody = () => ({
    name: need(v.name, 'name'),
    quota: int(v.quota, 'quota'),
    validity_days: int(v['validity-days'], 'validity-days'),
    requests_per_minute: int(v.rpm, 'rpm'),
    models: need(v.models, 'models')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
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
      return out(
        r.data
          .map(
            (x) =>
              `${x.plan_id}\t${x.name}\tquota=${x.quota}\tdays=${x.validity_days}\trpm=${x.requests_per_minute}\tmodels=${(x.models as string[]).join(',')}`,
          )
          .join('\n'),
        r,
      );
    }
    case 'account open': {
      const r = await c.json('POST', '/accounts', { name: need(v.name, 'name'), ...(v.id ? { account_id: v.id } : {}) });
      return out(`account ${r.account_id} opened`, r);
    }
    case 'account show': {
      const r = await c.json('GET', `/accounts/${encodeURIComponent(arg(p.positionals, 2, 'id'))}`);
      return out(
        Object.entries(r)
          .map(([k, x]) => `${k}: ${typeof x === 'object' ? JSON.stringify(x) : x}`)
          .join('\n'),
        r,
      );
    }
    case `subscribe ${sub}`: {
      const r = await c.json('POST', `/accounts/${encodeURIComponent(arg(p.positionals, 1, 'account'))}/subscription`, { plan_id: need(v.plan, 'plan') });
      return out(`${r.event === 'SubscriptionRenewed' ? 'renewed' : 'subscribed'}: ${r.accountId} on ${r.planId} until ${r.expiresAt}`, r);
    }
    case `grant ${sub}`: {
      const r = await c.json('POST', `/accounts/${encodeURIComponent(arg(p.positionals, 1, 'account'))}/extra-tokens`, {
        amount: int(v.amount, 'amount'),
        reason: (v.reason as string) ?? '',
        ...creditTermsOf(v),
      });
      return out(`granted ${r.granted} extra tokens to ${r.account_id}${r.expires_at ? ` until ${r.expires_at}` : ''}`, r);
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
    case 'key set':
    case 'key rotate':
      return runKeyCommand(sub as 'set' | 'rotate', p, c, out);
    case 'model set': {
      const body: Record<string, unknown> = {};
      if (v.multiplier !== undefined) body.multiplier = num(v.multiplier, 'multiplier');
      if (v.status !== undefined) body.status = v.status;
      if (v.alias !== undefined) body.alias = v.alias;
      if (v['no-alias']) body.alias = null;
      if (v['cache-read-weight'] !== undefined) body.cache_read_weight = num(v['cache-read-weight'], 'cache-read-weight');
      if (v['cache-write-weight'] !== undefined) body.cache_write_weight = num(v['cache-write-weight'], 'cache-write-weight');
      const r = await c.json('PATCH', `/models/${encodeURIComponent(arg(p.positionals, 2, 'id'))}`, body);
      return out(`model ${r.modelId}: multiplier ${(r.multiplierMilli as number) / 1000}, ${r.status}, alias ${r.alias ?? '-'}`, r);
    }
    case 'channel list': {
      const r = await c.json<{ data: Array<Record<string, unknown>> }>('GET', '/channels');
      return out(
        r.data
          .map((x) => `${x.id}\t${x.state}\tcalls=${x.calls}\tfailures=${x.failures}\tfailovers=${x.failovers}\tmodels=${(x.models as string[]).join(',')}`)
          .join('\n'),
        r,
      );
    }
    case 'channel disable':
    case 'channel enable': {
      const id = arg(p.positionals, 2, 'channel-id');
      const r = await c.json('PATCH', `/channels/${id.split('/').map(encodeURIComponent).join('/')}`, {
        enabled: sub === 'enable',
        reason: (v.reason as string) ?? '',
      });
      return out(`channel ${id}: ${r.state}${r.changed ? '' : ' (unchanged)'}`, r);
    }
    case 'model list': {
      const r = await c.json<{ data: Array<Record<string, unknown>> }>('GET', '/models');
      return out(r.data.map((m) => `${m.model_id}\t${(m.multiplier_milli as number) / 1000}\t${m.status}\t${m.alias ?? ''}`).join('\n'), r);
    }
    case 'correct': {
      const alsoFromNow = !!v['also-from-now'];
      const body: Record<string, unknown> = {
        model: need(v.model, 'model'),
        from: need(v.from, 'from'),
        reason: (v.reason as string) ?? '',
        dry_run: !!v['dry-run'],
        ...(v.to === undefined && alsoFromNow ? {} : { to: need(v.to, 'to') }),
        ...(v.component !== undefined ? { component: need(v.component, 'component') } : {}),
        ...(v.value !== undefined ? { value: num(v.value, 'value') } : { multiplier: num(v.multiplier, 'multiplier') }),
        ...(alsoFromNow ? { also_from_now: true } : {}),
        ...(v.id !== undefined ? { correction_id: need(v.id, 'id') } : {}),
      };
      const r = await c.json<Record<string, unknown> & { accounts: Array<Record<string, number | string>>; totals: Record<string, number> }>(
        'POST',
        '/corrections',
        body,
      );
      const figures = (x: Record<string, number | string>) =>
        `charges=${x.charges}\tbilled_originally=${x.billedOriginally}\tbilled_now=${x.billedNow}\tcorrected=${x.corrected}\tdifference=${x.difference}`;
      const shownValue = r.component === 'image_tokens' ? r.value : (r.value as number) / 1000;
      const lines = [
        `correction ${r.correctionId}: ${r.component} ${shownValue} on ${r.modelId} from ${r.from} to ${r.to}${r.alsoFromNow ? ', and from now on' : ''}`,
      ];
      lines.push(...r.accounts.map((a) => `${a.accountId}\t${figures(a)}`));
      lines.push(`total\t${figures(r.totals)}`);
      lines.push(r.dry_run ? 'dry run: nothing was written' : `applied: ${r.appended} adjustments appended, ${r.already_applied} already applied`);
      return out(lines.join('\n'), r);
    }
    case `statement ${sub}`: {
      const q = new URLSearchParams({ from: need(v.from, 'from'), to: need(v.to, 'to'), format: v.format === 'csv' ? 'csv' : 'json' });
      const res = await c.request('GET', `/accounts/${encodeURIComponent(arg(p.positionals, 1, 'account'))}/statement?${q}`);
      const text = await res.text();
      if (v.format === 'csv') {
        process.stdout.write(text);
        return;
      }
      const s = JSON.parse(text);
      return out(`${s.lines.length} lines; charges ${s.totals.billed}, adjustments ${s.totals.adjusted}, net ${s.totals.net}`, s);
    }
    case 'upstream-report': {
      const format = (v.format as string | undefined) ?? 'json';
      if (format !== 'csv' && format !== 'json') throw new CliError(`--format must be csv or json, got '${format}'.`, 2);
      const res = await c.request('GET', `/upstream-report?${new URLSearchParams({ from: need(v.from, 'from'), to: need(v.to, 'to'), format })}`);
      const text = await res.text();
      if (format === 'csv') {
        process.stdout.write(text);
        return;
      }
      const r = JSON.parse(text) as { rows: Array<Record<string, string | number>>; totals: Record<string, number> };
      const counts = (x: Record<string, string | number>) =>
        `calls=${x.calls}\tfailures=${x.failures}\tfailovers=${x.failovers}\tprompt=${x.prompt_tokens}\tcached=${x.cached_tokens}\tcache_write=${x.cache_write_tokens}\tcompletion=${x.completion_tokens}\treasoning=${x.reasoning_tokens}\timages=${x.images}\tbilled=${x.billed}`;
      return out([...r.rows.map((x) => `${x.day}\t${x.channel}\t${x.upstream_model}\t${counts(x)}`), `total\t\t\t${counts(r.totals)}`].join('\n'), r);
    }
    case 'verify': {
      const r = await c.json<{
        ok: boolean;
        events: number;
        streams: number;
        chainProblems: unknown[];
        readModelDifferences: unknown[];
        lotProblems?: string[];
        mode: 'full' | 'since_checkpoint';
        checkedEvents: number;
        since: { position: number; verifiedAt: string } | null;
      }>('POST', '/verify', v.full ? { full: true } : {});
      const human = r.ok
        ? r.mode === 'full'
          ? `ok: ${r.events} events in ${r.streams} streams; every hash chain verifies, every read model equals a rebuild, every lot sums and the journal balances`
          : `ok: ${r.checkedEvents} new events since the checkpoint of ${r.since?.verifiedAt} (position ${r.since?.position}), ${r.events} in all, in ${r.streams} streams; their hash chains verify, the read-model rows they changed equal the kept rebuild's, every lot sums (--full reads the whole log again)`
        : `FAILED:\n${r.chainProblems
            .map((x) => `chain: ${JSON.stringify(x)}`)
            .concat(r.readModelDifferences.map((x) => `read model: ${JSON.stringify(x)}`))
            .concat((r.lotProblems ?? []).map((x) => `lots: ${x}`))
            .join('\n')}`;
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
      const bar = v.json
        ? null
        : new cliProgress.SingleBar(
            { format: 'replay |{bar}| {percentage}% {value}/{total} events | {speed} events/s | ETA {eta_formatted}', hideCursor: true },
            cliProgress.Presets.shades_classic,
          );
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
            if (!started) {
              bar.start(Math.max(msg.head, msg.position), msg.position, { speed });
              started = true;
            }
            bar.setTotal(Math.max(msg.head, msg.position));
            bar.update(msg.position, { speed });
          } else if (msg.type === 'done') final = msg;
          else if (msg.type === 'error') {
            bar?.stop();
            throw new CliError(`replay failed: ${msg.message}`);
          }
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
    case 'webhook add':
    case 'webhook list':
    case 'webhook remove':
    case 'webhook deliveries':
    case 'webhook replay':
      return runWebhookCommand(sub, p, c, out);
    case 'price list':
    case 'price plan':
    case 'price pack':
    case 'payment record':
    case 'payment list':
    case 'payment refund':
    case 'payment stripe-replay':
    case 'codes mint':
    case 'unmatched list':
      return runPaymentCommand(cmd, sub, p, c, out);
    case 'finance report':
    case 'finance reconcile':
    case 'finance journal':
      return runFinanceCommand(sub, p, c, out);
    case 'period close':
    case 'period reopen':
    case 'period list':
      return runPeriodCommand(sub, p, c, out);
    case 'billing-profile show':
    case 'billing-profile set':
      return runBillingProfileCommand(sub, p, c, out);
    case 'invoices list':
    case 'invoices show':
      return runInvoiceCommand(sub, p, c, out);
    case 'cost rate':
    case 'cost rates':
    case 'cost import':
    case 'cost reconcile':
      return runCostCommand(`${cmd} ${sub}`, p, c, out);
    case 'fx set':
    case 'fx list':
      return runFxCommand(sub, p, c, out);
    default:
      throw new CliError(`Unknown command '${p.positionals.join(' ')}'.\n\n${COMMAND_HELP}`, 2);
  }
}
