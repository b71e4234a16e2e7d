// Stripe, through the official client: Checkout Sessions for a plan period or a pack, and the
// webhook's notices: each kept raw first (stripe-notices.ts), then run through the handler its
// event type names in the table of stripe-events/, and, on an operator's command, run again over
// the notices already kept (stripe-replay.ts). The session names the account and what is bought
// (metadata, copied onto its PaymentIntent), so every later notice finds them. No card data passes
// through Tollgate; the secret key and webhook secret are never logged.
import Stripe from 'stripe';
import type { Logger } from 'pino';
import type { Ledger } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import type { Database } from '../eventstore/db.ts';
import type { StripeSettings } from '../config.ts';
import { unmatchedDecider } from './unmatched.ts';
import type { Payments, Purchase } from './payments.ts';
import { recurringPriceId } from './stripe-subscriptions.ts';
import { stripeTaxRates } from './stripe-tax-rates.ts';
import { grossPrice, taxInGross } from '../money/tax.ts';
import { contextFor, dispatch, type Outcome } from './stripe-events/index.ts';
import { paymentOfIntent } from './stripe-events/booking.ts';
import { accountState } from '../accounts/index.ts';
import { ensureStripeNoticeTable, stripeNoticeStore, type NoticeSelection, type StoredNotice } from './stripe-notices.ts';
import { reasonOf, replayNotices, type Ran } from './stripe-replay.ts';

export { disputeFeeKept } from './stripe-events/index.ts';

export async function createStripeGateway(
  settings: StripeSettings,
  payments: Payments,
  ledger: Ledger,
  log: Logger,
  opts: { disputeSuspendsKeys: boolean },
  /** Where the notices are kept: the event store's database and schema. */
  store: { db: Database; schema: string },
) {
  if (!settings.secretKey || !settings.webhookSecret) return null;
  const base = settings.apiBase ? new URL(settings.apiBase) : null;
  const stripe = new Stripe(settings.secretKey, {
    maxNetworkRetries: 2,
    timeout: 20_000,
    telemetry: false,
    ...(base ? { host: base.hostname, port: base.port || (base.protocol === 'http:' ? 80 : 443), protocol: base.protocol === 'http:' ? 'http' : 'https' } : {}),
  });
  const webhookSecret = settings.webhookSecret;
  const taxRates = stripeTaxRates(stripe);
  await ensureStripeNoticeTable(store.db, store.schema);
  const notices = stripeNoticeStore(store.db, store.schema);

  /** A notice through its handler, its outcome (or error) written beside the stored notice. */
  async function run(event: Stripe.Event, replaying: StoredNotice | null): Promise<Ran> {
    const supersededBy = replaying ? (types: readonly string[]) => notices.laterAbout(replaying, types) : null;
    const { ctx, appended } = contextFor({ stripe, ledger, log, disputeSuspendsKeys: opts.disputeSuspendsKeys, supersededBy, tax: payments.taxSettings });
    let ran: Ran;
    try {
      ran = { outcome: await dispatch(event, ctx), appended: appended() };
    } catch (error) {
      ran = { outcome: null, appended: appended(), error };
    }
    // The ledger holds what the notice booked; this only tells the operator, so it never fails the notice.
    await notices
      .handled(event.id, ran.outcome === null ? { error: reasonOf(ran.error) } : { outcome: ran.outcome })
      .catch((err) => log.warn({ err, stripeEvent: event.id }, 'stripe notice: its outcome was not written'));
    return ran;
  }

  return {
    /**
     * A Checkout Session at the current list price: a plan as a subscription (a Stripe Price per plan
     * period, renewed by Stripe every period; `recurring: false` buys one period once), a pack once.
     */
    async checkout(
      accountId: string,
      purchase: Purchase,
      opts: { currency?: string; recurring?: boolean; returnTo?: { success: string; cancel: string } } = {},
    ) {
      const { listPrice, item, grant } = await payments.resolve(purchase, opts.currency);
      const settlement = (await payments.priceList()).currency;
      if (!listPrice && opts.currency && opts.currency !== settlement)
        throw new DomainError('invalid', `that plan or pack is not offered in ${opts.currency}`, { param: 'currency' });
      if (!listPrice)
        throw new DomainError('invalid', 'that plan or pack has no price and cannot be bought', { param: 'planId' in purchase ? 'plan_id' : 'pack_id' });
      // A payment in another currency is booked at the day's rate: without one it could not be, so none is taken.
      if (listPrice.currency !== settlement) await payments.requireRateToday(listPrice.currency);
      // Checkout charges the tax the payment will hold: the buyer's rate as a fixed tax rate on the line.
      const treatment = await payments.taxTreatmentFor(accountId);
      const lineTax = treatment && treatment.rateBasisPoints > 0 ? { tax_rates: [await taxRates.idFor(treatment)] } : {};
      const metadata: Record<string, string> = {
        account_id: accountId,
        ...('planId' in purchase ? { plan_id: purchase.planId } : { pack_id: purchase.packId }),
      };
      const common = {
        client_reference_id: accountId,
        metadata,
        success_url: opts.returnTo?.success ?? settings.successUrl,
        cancel_url: opts.returnTo?.cancel ?? settings.cancelUrl,
      };
      const session =
        grant.kind === 'plan' && opts.recurring !== false
          ? await stripe.checkout.sessions.create({
              ...common,
              mode: 'subscription',
              line_items: [{ quantity: 1, price: await recurringPriceId(stripe, grant.plan, listPrice), ...lineTax }],
              subscription_data: { metadata },
            })
          : await stripe.checkout.sessions.create({
              ...common,
              mode: 'payment',
              line_items: [
                {
                  quantity: 1,
                  price_data: {
                    currency: listPrice.currency.toLowerCase(),
                    unit_amount: listPrice.amount,
                    product_data: {
                      name: item.kind === 'plan' ? `Plan ${item.planId} (${item.tokens} tokens)` : `Pack ${item.packId} (${item.tokens} tokens)`,
                    },
                  },
                  ...lineTax,
                },
              ],
              payment_intent_data: { metadata },
            });
      const amount = grossPrice(listPrice.amount, treatment);
      return { id: session.id, url: session.url, mode: session.mode, amount, tax: taxInGross(amount, treatment), currency: listPrice.currency };
    },
    /**
     * A Checkout Session in setup mode: the customer saves a card for auto top-up (no charge). The
     * account's Stripe Customer is the one its saved card names, or a new one.
     */
    async cardSetup(accountId: string, opts: { returnTo?: { success: string; cancel: string } } = {}) {
      const state = await accountState(ledger, accountId);
      const customerId =
        state.paymentMethod?.customerId ??
        (await stripe.customers.create({ metadata: { account_id: accountId } }, { idempotencyKey: `tollgate-customer-${accountId}` })).id;
      const metadata = { account_id: accountId, purpose: 'auto_top_up' };
      const session = await stripe.checkout.sessions.create({
        mode: 'setup',
        customer: customerId,
        currency: ((await payments.priceList()).currency ?? 'USD').toLowerCase(),
        client_reference_id: accountId,
        metadata,
        setup_intent_data: { metadata },
        success_url: opts.returnTo?.success ?? settings.successUrl,
        cancel_url: opts.returnTo?.cancel ?? settings.cancelUrl,
      });
      return { id: session.id, url: session.url, mode: session.mode };
    },
    /**
     * Charges a pending top-up to the saved card, without the customer (off session), and books it
     * (null: the account has it pending no more, so nothing is charged).
     * The PaymentIntent's idempotency key is the top-up's id, so a second runner (another gateway,
     * or this one after a crash) gets the same PaymentIntent back: one charge, one payment.
     */
    async chargeTopUp(top: { topUpId: string; accountId: string; packId: string }): Promise<{ paymentId: string } | { failure: string } | null> {
      const state = await accountState(ledger, top.accountId);
      // Charged only while the account has it pending: a settled one (by another gateway) is never charged again.
      if (state.autoTopUp?.pending !== top.topUpId) return null;
      const card = state.paymentMethod;
      if (!card) return { failure: 'no saved card' };
      const { listPrice } = await payments.resolve({ packId: top.packId }).catch(() => ({ listPrice: null }));
      if (!listPrice) return { failure: `pack ${top.packId} is no longer on sale` };
      const amount = grossPrice(listPrice.amount, await payments.taxTreatmentFor(top.accountId));
      let pi: Stripe.PaymentIntent;
      try {
        pi = await stripe.paymentIntents.create(
          {
            amount,
            currency: listPrice.currency.toLowerCase(),
            customer: card.customerId,
            payment_method: card.paymentMethodId,
            off_session: true,
            confirm: true,
            description: `Auto top-up ${top.topUpId}`,
            metadata: { account_id: top.accountId, pack_id: top.packId, auto_top_up: top.topUpId },
          },
          { idempotencyKey: top.topUpId },
        );
      } catch (err) {
        // A declined card, or one that needs its holder: told to the customer, never retried in a loop.
        if (err instanceof Stripe.errors.StripeCardError) return { failure: `the card was declined: ${err.message}`.slice(0, 500) };
        throw err;
      }
      if (pi.status !== 'succeeded') return { failure: `the charge needs the customer (${pi.status})` };
      const { ctx } = contextFor({ stripe, ledger, log, disputeSuspendsKeys: opts.disputeSuspendsKeys, supersededBy: null, tax: payments.taxSettings });
      const found = await paymentOfIntent(ctx, pi.id);
      if (!found) throw new Error(`top-up ${top.topUpId}: PaymentIntent ${pi.id} succeeded but no payment was booked`);
      return { paymentId: found.paymentId };
    },
    /** Verifies the signature over the raw body (the library's own check); throws on a bad one. */
    verify: (raw: Buffer, signature: string): Stripe.Event => stripe.webhooks.constructEvent(raw, signature, webhookSecret),
    /** Keeps a verified notice raw, before it is handled; false when its event id was kept already. */
    keep: (event: Stripe.Event, raw: Buffer): Promise<boolean> =>
      notices.keep({
        eventId: event.id,
        type: event.type,
        objectId: objectIdOf(event),
        // Stripe always dates its events; one that came without a date is dated as received.
        created: Number.isFinite(event.created) ? event.created : Date.now() / 1000,
        body: raw.toString('utf8'),
      }),
    /** Runs a notice's handler; throws what the handler threw (Stripe delivers the notice again). */
    async handle(event: Stripe.Event): Promise<Outcome> {
      const ran = await run(event, null);
      if (ran.outcome === null) throw ran.error;
      return ran.outcome;
    },
    /** Runs today's handlers again over kept notices, in the order they came. */
    replay: (sel: NoticeSelection) => replayNotices(notices, run, sel),
  };
}

/** The id of the object a notice is about (a session, invoice, subscription, charge or dispute). */
const objectIdOf = (event: Stripe.Event): string | null => {
  const id = (event.data.object as { id?: unknown }).id;
  return typeof id === 'string' ? id : null;
};

export type StripeGateway = NonNullable<Awaited<ReturnType<typeof createStripeGateway>>>;

/** The processor's payments kept as unmatched, as the log holds them now (whether Stripe is on today or not). */
export async function unmatchedPayments(ledger: Pick<Ledger, 'streamState'>) {
  return Object.values((await ledger.streamState(unmatchedDecider, streams.unmatchedPayments())).byId);
}
