// The customer's side of money under /v1: the price list, redeeming a code, purchases and receipts.
import type { Context } from 'koa';
import type { BooksDeps } from './books-deps.ts';
import { ApiError, badRequest } from '../http/errors.ts';
import { purchaseOf, type Payments } from './payments.ts';
import { formatMoney } from '../money/money.ts';
import { accountState, paymentBody, paymentsInOrder, planTerms } from '../accounts/index.ts';
import type { OfferedPrice, PriceListState } from './prices.ts';
import { secondsToNextHour } from './code-attempts.ts';
import { callerOf } from '../http/state.ts';

/** 429 to an account past its hour's wrong or used codes (counted across gateways, src/books/code-attempts.ts). */
function tooManyCodes(now = new Date()): ApiError {
  const retry = secondsToNextHour(now);
  return new ApiError(429, `Too many wrong or used codes: try again in ${retry}s.`, 'requests', 'rate_limit_exceeded', 'code', {
    'retry-after': String(retry),
  });
}

/** An item's prices in the other currencies it is offered in (on sale only), as a customer reads them. */
const offeredBody = (offered: Record<string, OfferedPrice> | undefined) =>
  Object.entries(offered ?? {})
    .filter(([, o]) => o.active)
    .map(([currency, o]) => ({ amount: o.amount, currency, display: formatMoney({ amount: o.amount, currency }) }));

/** The price list as customers and operators read it: amounts in minor units and as decimals. */
export function priceListBody(prices: PriceListState, planNames: Map<string, string>) {
  const currency = prices.currency;
  const offered = new Set([...Object.values(prices.plans), ...Object.values(prices.packs)].flatMap((p) => Object.keys(p.offered ?? {})));
  return {
    object: 'price_list',
    currency,
    // The currencies a payment may be in: the settlement currency, and those an item is offered in.
    currencies: currency ? [currency, ...[...offered].sort()] : [],
    plans: Object.entries(prices.plans)
      .filter(([, p]) => p.active)
      .map(([planId, p]) => ({
        object: 'plan_price',
        plan_id: planId,
        name: planNames.get(planId) ?? planId,
        amount: p.amount,
        currency: p.currency,
        display: formatMoney(p),
        offered: offeredBody(p.offered),
      })),
    packs: Object.entries(prices.packs)
      .filter(([, p]) => p.active)
      .map(([packId, p]) => ({
        object: 'token_pack',
        pack_id: packId,
        name: p.name,
        tokens: p.tokens,
        amount: p.amount,
        currency: p.currency,
        display: formatMoney(p),
        offered: offeredBody(p.offered),
      })),
  };
}

export async function planNamesOf(deps: BooksDeps, prices: PriceListState): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const planId of Object.keys(prices.plans)) names.set(planId, (await planTerms(deps.ledger, planId).catch(() => null))?.name ?? planId);
  return names;
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** A printable receipt (no script, no style from elsewhere). */
export function receiptHtml(p: ReturnType<typeof paymentBody>): string {
  const rows: Array<[string, string]> = [
    ['Receipt', p.id],
    ['Account', p.account_id],
    ['Date', p.received_at],
    ['Paid by', p.processor],
    ['Item', p.item.kind === 'plan' ? `plan ${p.item.plan_id} (${p.item.tokens} tokens)` : `pack ${p.item.pack_id} (${p.item.tokens} tokens)`],
    ['Amount', `${p.display} ${p.currency}`],
    ['Refunded', `${formatMoney({ amount: p.refunded, currency: p.currency })} ${p.currency}`],
  ];
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Receipt ${escapeHtml(p.id)}</title></head><body><h1>Tollgate receipt</h1><table>${rows
    .map(([k, v]) => `<tr><th scope="row">${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`)
    .join('')}</table></body></html>`;
}

export function paymentRoutes(deps: BooksDeps, payments: Payments, opts: { codeAttemptsPerHour: number }) {
  const limit = opts.codeAttemptsPerHour;
  return {
    prices: async (ctx: Context) => {
      const prices = await payments.priceList();
      ctx.body = priceListBody(prices, await planNamesOf(deps, prices));
    },
    redeem: async (ctx: Context) => {
      // The member on the session API, the key on /v1.
      const { accountId, actor } = callerOf(ctx);
      const b = ctx.request.body as Record<string, unknown> | undefined;
      if (!b || typeof b !== 'object' || Array.isArray(b)) throw badRequest('The request body must be a JSON object with a "code".', 'code');
      if ((await payments.codeAttemptsLeft(accountId, limit)) === 0) throw tooManyCodes();
      const res = await payments.redeem(accountId, b.code, actor);
      if (!res) {
        // Two gateways may both have let a guess through: the count decides which one was over the limit.
        if (!(await payments.countRefusedCode(accountId, limit, actor))) throw tooManyCodes();
        // One answer for unknown, expired and used codes: a guesser learns nothing.
        throw new ApiError(400, 'This code is not valid, has expired or was already redeemed.', 'invalid_request_error', 'invalid_code', 'code');
      }
      const lot = await payments.lotOf(accountId, res.paymentId);
      ctx.status = 201;
      ctx.body = { object: 'redemption', payment: paymentBody(accountId, lot) };
    },
    /** A Stripe Checkout Session for a plan period or a pack: the customer pays on Stripe's page. */
    checkout: async (ctx: Context) => {
      if (!deps.stripe)
        throw new ApiError(400, 'Card payments are off on this gateway: ask the operator, or redeem a code.', 'invalid_request_error', 'stripe_off');
      const b = ctx.request.body as Record<string, unknown> | undefined;
      if (!b || typeof b !== 'object' || Array.isArray(b))
        throw badRequest('The request body must be a JSON object with a "plan_id" or a "pack_id".', 'plan_id');
      if (b.recurring !== undefined && typeof b.recurring !== 'boolean') throw badRequest('"recurring" must be true or false.', 'recurring');
      if (b.currency !== undefined && (typeof b.currency !== 'string' || !/^[A-Z]{3}$/.test(b.currency)))
        throw badRequest('"currency" must be an ISO 4217 code in capitals, such as EUR.', 'currency');
      const session = await deps.stripe.checkout(callerOf(ctx).accountId, purchaseOf(b.plan_id, b.pack_id), {
        currency: b.currency as string | undefined,
        recurring: b.recurring as boolean | undefined,
        returnTo: ctx.state.checkoutReturn,
      });
      ctx.status = 201;
      ctx.body = { object: 'checkout.session', ...session };
    },
    list: async (ctx: Context) => {
      const accountId = callerOf(ctx).accountId;
      const s = await accountState(deps.ledger, accountId);
      ctx.body = { object: 'list', data: paymentsInOrder(s.payments.values()).map((lot) => paymentBody(accountId, lot)) };
    },
    receipt: async (ctx: Context) => {
      const accountId = callerOf(ctx).accountId;
      const id = String(ctx.params.id ?? '');
      if (!/^pay_[0-9a-f]{24}$/.test(id)) throw badRequest('That is not a payment id.', 'id');
      const lot = (await accountState(deps.ledger, accountId)).payments.get(id);
      if (!lot) throw new ApiError(404, `payment ${id} not found`, 'invalid_request_error', 'not_found', 'id');
      const body = paymentBody(accountId, lot);
      if (ctx.query.format === 'html') {
        ctx.type = 'text/html; charset=utf-8';
        ctx.body = receiptHtml(body);
      } else ctx.body = { ...body, object: 'receipt' };
    },
  };
}
