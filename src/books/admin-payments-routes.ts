// The operator's side of money under /admin/v1: prices, manual payments, refunds, disputes and
// redemption codes. Every act is an event with the operator as its actor.
import Router from '@koa/router';
import type { BooksDeps } from './books-deps.ts';
import { ApiError, badRequest } from '../http/errors.ts';
import { requireId } from '../ledger/ledger.ts';
import type { Payments } from './payments.ts';
import { unmatchedPayments } from './stripe.ts';
import { MAX_REPLAY_PAGE } from './stripe-replay.ts';
import { planNamesOf, priceListBody } from './payments-routes.ts';
import { accountState, cancellationBody, paymentBody, paymentsInOrder } from '../accounts/index.ts';
import { formatMoney } from '../money/money.ts';

import { body, parseTime } from '../http/admin-input.ts';

const PROCESSOR_ID = /^[\x21-\x7e]{1,200}$/;
function processorId(v: unknown, name: string): string {
  if (typeof v !== 'string' || !PROCESSOR_ID.test(v)) throw badRequest(`'${name}' must be 1-200 printable characters without spaces.`, name);
  return v;
}

export function adminPaymentsRoutes(deps: BooksDeps, payments: Payments, opts: { disputeSuspendsKeys: boolean }): Router {
  const r = new Router();
  const { ledger } = deps;

  r.get('/prices', async (ctx) => {
    const prices = await payments.priceList();
    ctx.body = priceListBody(prices, await planNamesOf(deps, prices));
  });
  r.put('/plans/:id/price', async (ctx) => {
    const b = body(ctx);
    const data = await payments.pricePlan(ctx.params.id, b.amount, b.currency, b.active, ctx.state.actor);
    ctx.body = { object: 'plan_price', ...data };
  });
  r.put('/packs/:id', async (ctx) => {
    const b = body(ctx);
    const data = await payments.pricePack(
      ctx.params.id,
      {
        name: b.name,
        tokens: b.tokens,
        amount: b.amount,
        currency: b.currency,
        active: b.active,
        expires_in_days: b.expires_in_days,
        priority: b.priority,
        models: b.models,
      },
      ctx.state.actor,
    );
    ctx.body = { object: 'token_pack', ...data };
  });

  // A bank transfer or a paid invoice, recorded by the operator with its reference (idempotent by it).
  r.post('/accounts/:id/payments', async (ctx) => {
    const b = body(ctx);
    const res = await payments.recordManual(
      ctx.params.id,
      { reference: b.reference, amount: b.amount, currency: b.currency, fee: b.fee, planId: b.plan_id, packId: b.pack_id },
      ctx.state.actor,
    );
    const lot = await payments.lotOf(ctx.params.id, res.paymentId);
    ctx.status = res.recorded ? 201 : 200;
    ctx.body = { ...paymentBody(ctx.params.id, lot), already_recorded: !res.recorded };
  });
  r.get('/accounts/:id/payments', async (ctx) => {
    const accountId = requireId(ctx.params.id, 'account_id');
    const s = await accountState(ledger, accountId);
    if (!s.opened) throw new ApiError(404, `account ${accountId} not found`, 'invalid_request_error', 'not_found');
    ctx.body = {
      object: 'list',
      data: paymentsInOrder(s.payments.values()).map((lot) => paymentBody(accountId, lot)),
      disputes: [...s.disputes.entries()].map(([id, d]) => ({
        object: 'dispute',
        id,
        payment_id: d.paymentId,
        amount: d.amount,
        suspends_keys: d.suspendsKeys,
        status: d.outcome ?? 'open',
      })),
      cancellation: cancellationBody(s),
    };
  });
  r.post('/accounts/:id/payments/:payment/refunds', async (ctx) => {
    const b = body(ctx);
    const refundId = b.refund_id === undefined ? `manual-${Date.now()}` : processorId(b.refund_id, 'refund_id');
    const events = await payments.refund(ctx.params.id, ctx.params.payment, b.amount, refundId, ctx.state.actor);
    const refund = events.find((e) => e.type === 'PaymentRefunded')?.data as Record<string, unknown> | undefined;
    ctx.status = refund ? 201 : 200;
    ctx.body = refund
      ? { object: 'refund', ...refund, display: formatMoney({ amount: refund.amount as number, currency: refund.currency as string }) }
      : { object: 'refund', refundId, already_recorded: true };
  });
  r.post('/accounts/:id/payments/:payment/disputes', async (ctx) => {
    const b = body(ctx);
    if (typeof b.amount !== 'number') throw badRequest("'amount' must be a whole number of minor units.", 'amount');
    const suspend = b.suspend_keys === undefined ? opts.disputeSuspendsKeys : b.suspend_keys === true;
    const events = await payments.openDispute(ctx.params.id, ctx.params.payment, processorId(b.dispute_id, 'dispute_id'), b.amount, suspend, ctx.state.actor);
    ctx.body = { object: 'dispute', events: events.map((e) => e.type) };
  });
  r.post('/accounts/:id/disputes/:dispute/close', async (ctx) => {
    const b = body(ctx);
    if (b.outcome !== 'won' && b.outcome !== 'lost') throw badRequest("'outcome' must be won or lost.", 'outcome');
    const fee = b.fee === undefined ? 0 : b.fee;
    if (typeof fee !== 'number') throw badRequest("'fee' must be a whole number of minor units.", 'fee');
    const events = await payments.closeDispute(ctx.params.id, ctx.params.dispute, b.outcome, fee, ctx.state.actor);
    ctx.body = { object: 'dispute', events: events.map((e) => ({ type: e.type, ...e.data })) };
  });

  // Processor payments that matched no account, plan, pack or the settlement currency: nothing granted, kept here.
  r.get('/unmatched-payments', async (ctx) => {
    ctx.body = { object: 'list', data: await unmatchedPayments(deps.ledger) };
  });

  // Stripe's notices as received, run again through today's handlers (after a handler fix): all, those
  // received since a time, or one event; a page at a time (starting_after the last one reported).
  r.post('/payments/stripe/replay', async (ctx) => {
    if (!deps.stripe) throw new ApiError(400, 'Stripe payments are off on this gateway: nothing to replay through.', 'invalid_request_error', 'stripe_off');
    const b = body(ctx);
    const limit = b.limit === undefined ? 100 : b.limit;
    if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_REPLAY_PAGE)
      throw badRequest(`'limit' must be a whole number from 1 to ${MAX_REPLAY_PAGE}.`, 'limit');
    const { data, hasMore } = await deps.stripe.replay({
      since: b.since === undefined ? undefined : parseTime(b.since, 'since'),
      eventId: b.event_id === undefined ? undefined : processorId(b.event_id, 'event_id'),
      startingAfter: b.starting_after === undefined ? undefined : processorId(b.starting_after, 'starting_after'),
      limit,
    });
    const count = (result: string) => data.filter((n) => n.result === result).length;
    ctx.body = {
      object: 'list',
      data: data.map((n) => ({
        object: 'stripe_notice_replay',
        event_id: n.eventId,
        type: n.type,
        created: n.created,
        received_at: n.receivedAt,
        result: n.result,
        outcome: n.outcome,
        events: n.events,
        error: n.error,
      })),
      has_more: hasMore,
      handled: count('handled'),
      unchanged: count('unchanged'),
      failed: count('failed'),
    };
  });

  // Redemption codes: shown in this answer only; the ledger keeps their hashes.
  r.post('/code-batches', async (ctx) => {
    const b = body(ctx);
    let expiresAt: Date | null = null;
    if (b.expires_at !== undefined && b.expires_at !== null) {
      expiresAt = typeof b.expires_at === 'string' ? new Date(b.expires_at) : new Date(NaN);
      if (Number.isNaN(expiresAt.getTime())) throw badRequest("'expires_at' must be an ISO 8601 time.", 'expires_at');
      // A batch that could never be redeemed is a mistake, not a batch.
      if (expiresAt.getTime() <= Date.now()) throw badRequest("'expires_at' must be in the future.", 'expires_at');
    }
    const batch = await payments.mintCodes(
      { count: b.count, amount: b.amount, currency: b.currency, expiresAt, planId: b.plan_id, packId: b.pack_id },
      ctx.state.actor,
    );
    ctx.status = 201;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = {
      object: 'code_batch',
      batch_id: batch.batchId,
      item: batch.item,
      currency: batch.currency,
      expires_at: expiresAt?.toISOString() ?? null,
      codes: batch.codes,
    };
  });
  return r;
}
