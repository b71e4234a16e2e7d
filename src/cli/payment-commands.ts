// `tollgate price|payment|codes|unmatched …`: the money admin API (src/books/admin-payments-routes.ts)
// from the command line (`payment stripe-replay`: Stripe's kept notices through today's handlers). Amounts are whole minor units of the settlement currency (cents for USD).
import { CliError, creditTermsOf, requiredArg as arg, type AdminClient, type CliArgs as Args, type CliOut as Out } from './admin-client.ts';

/** A whole number (minor units, tokens, a count): never a decimal, so no float reaches money. */
function whole(v: string | boolean | undefined, name: string): number {
  if (typeof v !== 'string' || !/^\d+$/.test(v))
    throw new CliError(`--${name} must be a whole number${name === 'amount' || name === 'fee' ? ' of minor units (cents)' : ''}.`, 2);
  return Number(v);
}
const purchase = (v: Args['values']) => {
  if ((v.plan === undefined) === (v.pack === undefined)) throw new CliError('Give exactly one of --plan and --pack.', 2);
  return v.plan !== undefined ? { plan_id: String(v.plan) } : { pack_id: String(v.pack) };
};
const enc = encodeURIComponent;

type PaymentView = {
  id: string;
  processor: string;
  display: string;
  currency: string;
  item: Record<string, unknown>;
  received_at: string;
  refunded: number;
  tokens_withdrawn: number;
};
type ReplayedNotice = { event_id: string; type: string; result: string; outcome: string | null; events: number; error: string | null };

const paymentLine = (p: PaymentView) =>
  `${p.id}\t${p.processor}\t${p.display} ${p.currency}\t${p.item.kind} ${p.item.plan_id ?? p.item.pack_id} (${p.item.tokens} tokens)\t${p.received_at}\trefunded=${p.refunded}\twithdrawn=${p.tokens_withdrawn}`;

export async function runPaymentCommand(cmd: string, sub: string, p: Args, c: AdminClient, out: Out): Promise<void> {
  const v = p.values;
  switch (`${cmd} ${sub}`) {
    case 'price list': {
      const r = await c.json<{ currency: string; plans: Array<Record<string, unknown>>; packs: Array<Record<string, unknown>> }>('GET', '/prices');
      const lines = [
        ...r.plans.map((x) => `plan ${x.plan_id}\t${x.display} ${r.currency} per period`),
        ...r.packs.map((x) => `pack ${x.pack_id}\t${x.tokens} tokens\t${x.display} ${r.currency}`),
      ];
      return out(lines.join('\n') || `(no prices; settlement currency ${r.currency})`, r);
    }
    case 'price plan': {
      const id = arg(p.positionals, 2, 'plan');
      const r = await c.json('PUT', `/plans/${enc(id)}/price`, { amount: whole(v.amount, 'amount'), ...(v.currency ? { currency: v.currency } : {}) });
      return out(`plan ${id} priced at ${r.amount} ${r.currency} minor units per period`, r);
    }
    case 'price pack': {
      const id = arg(p.positionals, 2, 'pack');
      const r = await c.json('PUT', `/packs/${enc(id)}`, {
        name: v.name ?? id,
        tokens: whole(v.tokens, 'tokens'),
        amount: whole(v.amount, 'amount'),
        ...(v.currency ? { currency: v.currency } : {}),
        ...creditTermsOf(v, { withDate: false }),
      });
      return out(`pack ${id}: ${r.tokens} tokens for ${r.amount} ${r.currency} minor units`, r);
    }
    case 'payment record': {
      const account = arg(p.positionals, 2, 'account');
      if (typeof v.reference !== 'string') throw new CliError('Missing --reference (the transfer or invoice reference).', 2);
      const body: Record<string, unknown> = { reference: v.reference, amount: whole(v.amount, 'amount'), currency: v.currency ?? 'USD', ...purchase(v) };
      if (v.fee !== undefined) body.fee = whole(v.fee, 'fee');
      const r = await c.json<PaymentView & { already_recorded: boolean }>('POST', `/accounts/${enc(account)}/payments`, body);
      return out(`${r.already_recorded ? 'already recorded' : 'recorded'}: ${paymentLine(r)}`, r);
    }
    case 'payment list': {
      const r = await c.json<{ data: PaymentView[] }>('GET', `/accounts/${enc(arg(p.positionals, 2, 'account'))}/payments`);
      return out(r.data.map(paymentLine).join('\n') || '(no payments)', r);
    }
    case 'payment refund': {
      const account = arg(p.positionals, 2, 'account');
      const payment = arg(p.positionals, 3, 'payment-id');
      const body: Record<string, unknown> = { amount: whole(v.amount, 'amount') };
      if (typeof v.id === 'string') body.refund_id = v.id;
      const r = await c.json('POST', `/accounts/${enc(account)}/payments/${enc(payment)}/refunds`, body);
      return out(
        r.already_recorded
          ? 'already recorded'
          : `refunded ${r.display}: ${r.tokensWithdrawn} unused tokens withdrawn, ${r.refundedRevenue} minor units of revenue refunded`,
        r,
      );
    }
    case 'codes mint': {
      const body: Record<string, unknown> = { count: whole(v.count, 'count'), amount: whole(v.amount, 'amount'), ...purchase(v) };
      if (typeof v.expires === 'string') body.expires_at = v.expires;
      const r = await c.json<{ batch_id: string; codes: string[] }>('POST', '/code-batches', body);
      return out(`batch ${r.batch_id}: ${r.codes.length} codes (shown once, store them now):\n${r.codes.join('\n')}`, r);
    }
    case 'payment stripe-replay': {
      // Page after page (the API answers at most a page), each notice on a line as it is reported.
      const body: Record<string, unknown> = { limit: 100 };
      if (v.since !== undefined) body.since = String(v.since);
      if (v.event !== undefined) body.event_id = String(v.event);
      const all: ReplayedNotice[] = [];
      for (let more = true; more;) {
        const r = await c.json<{ data: ReplayedNotice[]; has_more: boolean }>('POST', '/payments/stripe/replay', body);
        all.push(...r.data);
        more = r.has_more && r.data.length > 0;
        body.starting_after = r.data.at(-1)?.event_id;
      }
      const count = (result: string) => all.filter((n) => n.result === result).length;
      const summary = { handled: count('handled'), unchanged: count('unchanged'), failed: count('failed') };
      out(
        [
          ...all.map((n) => `${n.event_id}\t${n.type}\t${n.result}${n.outcome ? ` (${n.outcome})` : ''}\tevents=${n.events}${n.error ? `\t${n.error}` : ''}`),
          `${summary.handled} handled, ${summary.unchanged} unchanged, ${summary.failed} failed`,
        ].join('\n'),
        { object: 'list', data: all, ...summary },
      );
      if (summary.failed > 0) throw new CliError(`${summary.failed} notices failed (see their reasons above); run the replay again once fixed.`);
      return;
    }
    case 'unmatched list': {
      const r = await c.json<{ data: Array<Record<string, unknown>> }>('GET', '/unmatched-payments');
      return out(
        r.data.map((u) => `${u.processor} ${u.processorPaymentId}\t${u.amount} ${u.currency}\t${u.reason}`).join('\n') || '(no unmatched payments)',
        r,
      );
    }
    default:
      throw new CliError(`Unknown command '${cmd} ${sub}'.`, 2);
  }
}
