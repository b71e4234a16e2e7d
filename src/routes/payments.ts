// The customer's side of money under /v1: the price list, redeeming a code, purchases and receipts.
import type { Context } from 'koa';
import type { GatewayDeps } from '../gateway/deps.ts';
import { ApiError, badRequest } from '../http/errors.ts';
import { purchaseOf, type Payments } from '../payments/service.ts';
import { formatMoney } from '../money/money.ts';
import type { PaidLot } from '../money/lots.ts';
import type { AccountState } from '../ledger/account-state.ts';
import type { PriceListState } from '../money/prices.ts';
import { secondsToNextHour } from '../money/code-attempts.ts';

/** 429 to an account past its hour's wrong or used codes (counted across gateways, src/money/code-attempts.ts). */
function tooManyCodes(now = new Date()): ApiError {
  const retry = secondsToNextHour(now);
  return new ApiError(429, `Too many wrong or used codes: try again in ${retry}s.`, 'requests', 'rate_limit_exceeded', 'code', {
    'retry-after': String(retry),
  });
}

/** The price list as customers and operators read it: amounts in minor units and as decimals. */
export function priceListBody(prices: PriceListState, planNames: Map<string, string>) {
  const currency = prices.currency;
  return {
    object: 'price_list',
    currency,
    plans: Object.entries(prices.plans)
      .filter(([, p]) => p.active)
      .map(([planId, p]) => ({
        object: 'plan_price',
        plan_id: planId,
        name: planNames.get(planId) ?? planId,
        amount: p.amount,
        currency: p.currency,
        display: formatMoney(p),
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
      })),
  };
}

export async function planNamesOf(deps: GatewayDeps, prices: PriceListState): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const planId of Object.keys(prices.plans)) names.set(planId, (await deps.ledger.planTerms(planId).catch(() => null))?.name ?? planId);
  return names;
}

/** A payment as its receipt and the listings show it. */
export function paymentBody(accountId: string, lot: PaidLot) {
  return {
    object: 'payment',
    id: lot.paymentId,
    account_id: accountId,
    processor: lot.processor,
    amount: lot.amount,
    currency: lot.currency,
    display: formatMoney(lot),
    fee: lot.fee,
    received_at: lot.receivedAt,
    reference: lot.reference,
    item: lot.kind === 'plan' ? { kind: 'plan', plan_id: lot.itemId, tokens: lot.tokens } : { kind: 'pack', pack_id: lot.itemId, tokens: lot.tokens },
    period_starts_at: lot.periodStartsAt,
    refunded: lot.refunded,
    tokens_withdrawn: lot.tokensWithdrawn,
  };
}

/** A recurring plan's cancellation as the reads show it: the plan ends at `ends_at` and does not renew (null: none). */
export function cancellationBody(s: AccountState) {
  const c = s.cancellation;
  if (!c) return null;
  return {
    object: 'cancellation',
    processor: c.processor,
    subscription_id: c.processorSubscriptionId,
    plan_id: c.planId,
    kind: c.kind,
    cancelled_at: c.cancelledAt,
    ends_at: c.endsAt,
  };
}

/** An account's payments in the order they were received (the state's map has no order). */
export const paymentsInOrder = (payments: Iterable<PaidLot>): PaidLot[] =>
  [...payments].sort((a, b) => a.receivedAt.localeCompare(b.receivedAt) || a.paymentId.localeCompare(b.paymentId));

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

export function paymentRoutes(deps: GatewayDeps, payments: Payments, opts: { codeAttemptsPerHour: number }) {
  const limit = opts.codeAttemptsPerHour;
  return {
    prices: async (ctx: Context) => {
      const prices = await payments.priceList();
      ctx.body = priceListBody(prices, await planNamesOf(deps, prices));
    },
    redeem: async (ctx: Context) => {
      const accountId: string = ctx.state.auth.accountId;
      // The member on the session API, the key on /v1.
      const actor: string = ctx.state.actor ?? `key:${ctx.state.auth.keyId}`;
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
      const session = await deps.stripe.checkout(ctx.state.auth.accountId, purchaseOf(b.plan_id, b.pack_id), {
        recurring: b.recurring as boolean | undefined,
        returnTo: ctx.state.checkoutReturn,
      });
      ctx.status = 201;
      ctx.body = { object: 'checkout.session', ...session };
    },
    list: async (ctx: Context) => {
      const accountId: string = ctx.state.auth.accountId;
      const s = await deps.ledger.accountState(accountId);
      ctx.body = { object: 'list', data: paymentsInOrder(s.payments.values()).map((lot) => paymentBody(accountId, lot)) };
    },
    receipt: async (ctx: Context) => {
      const accountId: string = ctx.state.auth.accountId;
      const id = String(ctx.params.id ?? '');
      if (!/^pay_[0-9a-f]{24}$/.test(id)) throw badRequest('That is not a payment id.', 'id');
      const lot = (await deps.ledger.accountState(accountId)).payments.get(id);
      if (!lot) throw new ApiError(404, `payment ${id} not found`, 'invalid_request_error', 'not_found', 'id');
      const body = paymentBody(accountId, lot);
      if (ctx.query.format === 'html') {
        ctx.type = 'text/html; charset=utf-8';
        ctx.body = receiptHtml(body);
      } else ctx.body = { ...body, object: 'receipt' };
    },
  };
}
