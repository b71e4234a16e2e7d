// Payments as the gateway takes them: the price list, manual payments, refunds and disputes,
// redemption codes. Each resolves what was bought against the price list and the plan's terms,
// then appends through the account decider, where payment and grant are one decision.
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor, requireId } from '../ledger/ledger.ts';
import { streams, type DomainEvent, type PaidItem, type PaymentFacts, type PaymentProcessor } from '../ledger/events.ts';
import { DomainError, invalid, requireTokenAmount } from '../ledger/errors.ts';
import { DuplicateEventError } from '../eventstore/errors.ts';
import { uuidFrom } from '../ledger/event-ids.ts';
import { priceIn, priceListDecider, type PackCredit, type PriceListState } from './prices.ts';
import { exchangeRatesDecider, rateOn, requireRateOn } from '../money/exchange-rates.ts';
import { codeBatchDecider, generateCode, newBatchId, parseCode, MAX_CODES_PER_BATCH } from './codes.ts';
import { convertMoney, currencyOf, requireMinorUnits, type Money } from '../money/money.ts';
import { hashKey } from '../keys/index.ts';
import type { CancellationCommand, CancellationKind, PaidLot, RateNow, RecordPaymentCommand } from '../accounts/index.ts';
import { codeAttemptsDecider, utcHour } from './code-attempts.ts';
import { billingProfileDecider } from './billing-profile.ts';
import { NO_TAX, taxApplied, taxTreatment, type TaxApplied, type TaxSettings, type TaxTreatment } from '../money/tax.ts';
import { accountCommand, accountState, planTerms, requireExpiryDays, requireModels, requirePriority } from '../accounts/index.ts';

/** Tollgate's id of a processor's payment: the same processor id always gives the same payment. */
export const paymentIdFor = (processor: PaymentProcessor, processorPaymentId: string): string =>
  `pay_${hashKey(`${processor}|${processorPaymentId}`).slice(0, 24)}`;

/** The event ids of a payment's append: deterministic, so the store refuses a second copy even from another account's stream. */
const paymentEventIds = (paymentId: string) => (_e: DomainEvent, i: number) => uuidFrom(`payment|${paymentId}|${i}`);

/** What can be bought: a plan period or a pack, by id. */
export type Purchase = { planId: string } | { packId: string };

export function purchaseOf(planId: unknown, packId: unknown): Purchase {
  if ((planId === undefined) === (packId === undefined)) throw invalid('name exactly one of plan_id and pack_id', { param: 'plan_id' });
  return planId !== undefined ? { planId: requireId(planId, 'plan_id') } : { packId: requireId(packId, 'pack_id') };
}

export function createPayments(ledger: Ledger, tax: TaxSettings = NO_TAX) {
  const priceList = (): Promise<PriceListState> => ledger.streamState(priceListDecider, streams.priceList());
  const onPriceList = (command: Parameters<typeof priceListDecider.decide>[0], actor: string) =>
    ledger.command(priceListDecider, streams.priceList(), command, metadataFor(actor));

  /** A plan's terms; an unknown plan is the caller's mistake (400), not a missing resource. */
  async function knownPlan(planId: string) {
    try {
      return await planTerms(ledger, planId);
    } catch (err) {
      if (err instanceof DomainError && err.code === 'not_found') throw invalid(`there is no plan ${planId}`, { param: 'plan_id' });
      throw err;
    }
  }

  /**
   * The grant a purchase makes, and its current list price in `currency` (the settlement currency by
   * default; null when it has none in it: not on sale, or not offered in that currency).
   */
  async function resolve(p: Purchase, currency?: string): Promise<{ grant: RecordPaymentCommand['grant']; item: PaidItem; listPrice: Money | null }> {
    const prices = await priceList();
    const want = currency ?? prices.currency ?? '';
    if ('planId' in p) {
      const plan = await knownPlan(p.planId);
      return {
        grant: { kind: 'plan', plan },
        item: { kind: 'plan', planId: plan.planId, tokens: plan.quota },
        listPrice: priceIn(prices, prices.plans[p.planId], want),
      };
    }
    const pack = prices.packs[p.packId];
    if (!pack) throw invalid(`there is no pack ${p.packId}`, { param: 'pack_id' });
    return {
      grant: {
        kind: 'pack',
        packId: p.packId,
        packName: pack.name,
        tokens: pack.tokens,
        credit: { expiresInDays: pack.expiresInDays, priority: pack.priority, models: pack.models },
      },
      item: { kind: 'pack', packId: p.packId, tokens: pack.tokens },
      listPrice: priceIn(prices, pack, want),
    };
  }

  const exchangeRates = () => ledger.streamState(exchangeRatesDecider, streams.exchangeRates());

  /**
   * A payment's currency: the settlement currency, or one the item is offered in (400 naming
   * `currency` otherwise). A code's batch was sold in the settlement currency.
   */
  async function requireOffered(currency: unknown, purchase: Purchase): Promise<string> {
    const code = currencyOf(currency).code;
    const { currency: settlement } = await priceList();
    if (settlement && code !== settlement && !(await resolve(purchase, code)).listPrice)
      throw invalid(`that ${'planId' in purchase ? 'plan' : 'pack'} is not offered in ${code}: pay in ${settlement} or a currency it is priced in`, {
        param: 'currency',
      });
    return code;
  }

  /**
   * A payment in another currency converted at the rate of its day (a conflict when there is none
   * yet). A fee the processor took in the settlement currency already is kept as it is.
   */
  async function converted(input: { amount: number; currency: string; fee: number | null; feeCurrency: string | null; tax: TaxApplied | null; now: Date }) {
    const { currency: settlement } = await priceList();
    if (!settlement || input.currency === settlement) return null;
    const used = requireRateOn(await exchangeRates(), input.currency, input.now.toISOString().slice(0, 10));
    const to = (amount: number) => convertMoney({ amount, currency: input.currency }, settlement, used.rate).amount;
    const feeSettled = input.feeCurrency === settlement;
    return {
      settlement: {
        amount: to(input.amount),
        currency: settlement,
        fee: input.fee === null ? null : feeSettled ? input.fee : to(input.fee),
        tax: input.tax ? { ...input.tax, amount: to(input.tax.amount) } : null,
      },
      fx: { currency: input.currency, amount: input.amount, fee: feeSettled ? null : input.fee, tax: input.tax?.amount ?? 0, ...used },
    };
  }

  /** The day's rate for a refund of a payment made in another currency (the payment's own when none is recorded since). */
  async function rateNowFor(lot: PaidLot, now: Date): Promise<RateNow | undefined> {
    if (!lot.fx) return undefined;
    return rateOn(await exchangeRates(), lot.fx.currency, now.toISOString().slice(0, 10)) ?? undefined;
  }

  /** How the account's purchases are taxed now: by its billing profile's country and tax id (null: untaxed). */
  async function taxTreatmentFor(accountId: string): Promise<TaxTreatment | null> {
    if (tax.table.size === 0) return null;
    const { profile } = await ledger.streamState(billingProfileDecider, streams.billingProfile(accountId));
    return taxTreatment(tax.table, tax.sellerCountry, profile);
  }

  /** The settlement currency, which a payment must be in. */
  async function requireSettlementCurrency(currency: unknown): Promise<string> {
    const code = currencyOf(currency).code;
    const { currency: settlement } = await priceList();
    if (settlement && code !== settlement) throw invalid(`payments are in the ledger's settlement currency, ${settlement}`, { param: 'currency' });
    return code;
  }

  /**
   * Records a payment and its grant in one append. Idempotent by the processor's payment id:
   * `recorded` is false when that payment was already recorded (on this account or another).
   */
  async function recordPayment(
    input: PaymentFacts & {
      accountId: string;
      reference?: string;
      purchase: Purchase;
      /** A pack's tokens as sold (a code minted before the pack changed), not as listed now. */
      packTokens?: number;
      /** The fee's currency, when it is not the payment's (a processor's fee in its balance currency). */
      feeCurrency?: string | null;
      actor: string;
      now?: Date;
    },
  ): Promise<{ paymentId: string; recorded: boolean; events: DomainEvent[] }> {
    const resolved = (await resolve(input.purchase)).grant;
    const grant = resolved.kind === 'pack' && input.packTokens ? { ...resolved, tokens: input.packTokens } : resolved;
    const paymentId = paymentIdFor(input.processor, input.processorPaymentId);
    // A code's payment was taxed where the code was sold; every other amount holds the tax of the buyer's country.
    const applied = input.processor === 'code' ? null : taxApplied(input.amount, await taxTreatmentFor(input.accountId));
    const now = input.now ?? new Date();
    const fx = await converted({ amount: input.amount, currency: input.currency, fee: input.fee, feeCurrency: input.feeCurrency ?? null, tax: applied, now });
    const tax = fx ? fx.settlement.tax : applied;
    const command: RecordPaymentCommand = {
      type: 'RecordPayment',
      paymentId,
      processor: input.processor,
      processorPaymentId: input.processorPaymentId,
      amount: fx ? fx.settlement.amount : input.amount,
      currency: fx ? fx.settlement.currency : input.currency,
      fee: fx ? fx.settlement.fee : input.fee,
      reference: input.reference,
      grant,
      ...(tax ? { tax } : {}),
      ...(fx ? { fx: fx.fx } : {}),
      now,
    };
    try {
      const res = await accountCommand(ledger, input.accountId, command, metadataFor(input.actor), paymentEventIds(paymentId));
      return { paymentId, recorded: res.events.length > 0, events: res.events.map((e) => ({ type: e.type, data: e.data }) as DomainEvent) };
    } catch (err) {
      if (err instanceof DuplicateEventError) return { paymentId, recorded: false, events: [] };
      throw err;
    }
  }

  async function lotOf(accountId: string, paymentId: string): Promise<PaidLot> {
    const lot = (await accountState(ledger, accountId)).payments.get(paymentId);
    if (!lot) throw new DomainError('not_found', `payment ${paymentId} not found on account ${accountId}`, { param: 'payment_id' });
    return lot;
  }

  return {
    priceList,
    resolve,
    exchangeRates,
    /** A conflict naming the currency when a payment in it today could not be booked (no exchange rate yet). */
    async requireRateToday(currency: string, now = new Date()) {
      requireRateOn(await exchangeRates(), currency, now.toISOString().slice(0, 10));
    },
    recordPayment,
    taxTreatmentFor,
    taxSettings: tax,
    lotOf,
    /** Sets the ledger's settlement currency once (start-up); a different one later is refused. */
    async ensureCurrency(currency: string, actor = 'system:config') {
      await onPriceList({ type: 'SetCurrency', currency }, actor);
      return (await priceList()).currency as string;
    },
    async pricePlan(planId: string, amount: unknown, currency: unknown, active: unknown, actor: string) {
      await knownPlan(requireId(planId, 'plan_id'));
      const res = await onPriceList(
        {
          type: 'PricePlan',
          planId,
          amount: amount as number,
          currency: currency === undefined ? undefined : String(currency),
          active: active === false ? false : true,
        },
        actor,
      );
      return res.events[0]?.data;
    },
    async pricePack(
      packId: string,
      b: {
        name: unknown;
        tokens: unknown;
        amount: unknown;
        currency?: unknown;
        active?: unknown;
        expires_in_days?: unknown;
        priority?: unknown;
        models?: unknown;
      },
      actor: string,
    ) {
      requireId(packId, 'pack_id');
      const credit: PackCredit = {};
      if (b.expires_in_days !== undefined && b.expires_in_days !== null) credit.expiresInDays = requireExpiryDays(b.expires_in_days, 'expires_in_days');
      if (b.priority !== undefined && b.priority !== null) credit.priority = requirePriority(b.priority, 'priority');
      if (b.models !== undefined && b.models !== null) credit.models = requireModels(b.models, 'models');
      const res = await onPriceList(
        {
          type: 'PricePack',
          packId,
          name: b.name as string,
          tokens: b.tokens as number,
          amount: b.amount as number,
          currency: b.currency === undefined ? undefined : String(b.currency),
          active: b.active === false ? false : true,
          credit,
        },
        actor,
      );
      return res.events[0]?.data;
    },
    /** An operator records a bank transfer or a paid invoice; its reference is the processor id (idempotent). */
    async recordManual(
      accountId: string,
      b: { reference: unknown; amount: unknown; currency: unknown; fee?: unknown; planId?: unknown; packId?: unknown },
      actor: string,
    ) {
      if (typeof b.reference !== 'string' || !/^[\x21-\x7e][\x20-\x7e]{0,199}$/.test(b.reference))
        throw invalid('reference must be 1-200 printable characters (the transfer or invoice reference)', { param: 'reference' });
      const purchase = purchaseOf(b.planId, b.packId);
      const currency = await requireOffered(b.currency, purchase);
      return recordPayment({
        accountId: requireId(accountId, 'account_id'),
        processor: 'manual',
        processorPaymentId: b.reference.trim(),
        amount: requireMinorUnits(b.amount, 'amount', { allowZero: true }),
        currency,
        fee: b.fee === undefined || b.fee === null ? null : requireMinorUnits(b.fee, 'fee', { allowZero: true }),
        reference: b.reference,
        purchase,
        actor,
      });
    },
    /** A refund of part or all of a payment, in the currency it was made in (idempotent by refund id). */
    async refund(accountId: string, paymentId: string, amount: unknown, refundId: string, actor: string, now = new Date()) {
      requireMinorUnits(amount, 'amount');
      const rateNow = await rateNowFor(await lotOf(requireId(accountId, 'account_id'), paymentId), now);
      const res = await accountCommand(
        ledger,
        accountId,
        { type: 'RefundPayment', paymentId, refundId, amount: amount as number, now, ...(rateNow ? { rateNow } : {}) },
        metadataFor(actor),
      );
      return res.events;
    },
    async openDispute(accountId: string, paymentId: string, disputeId: string, amount: number, suspendKeys: boolean, actor: string) {
      return (await accountCommand(ledger, accountId, { type: 'OpenDispute', paymentId, disputeId, amount, suspendKeys }, metadataFor(actor))).events;
    },
    async closeDispute(accountId: string, disputeId: string, outcome: 'won' | 'lost', fee: number, actor: string, now = new Date()) {
      const state = await accountState(ledger, accountId);
      const disputed = state.disputes.get(disputeId);
      const lot = disputed ? state.payments.get(disputed.paymentId) : undefined;
      const rateNow = lot ? await rateNowFor(lot, now) : undefined;
      return (
        await accountCommand(ledger, accountId, { type: 'CloseDispute', disputeId, outcome, fee, now, ...(rateNow ? { rateNow } : {}) }, metadataFor(actor))
      ).events;
    },
    /** A recurring plan stops renewing (or, `resume`, renews again); idempotent by the processor's subscription id. Resolves to the events appended. */
    async setRenewal(accountId: string, processor: PaymentProcessor, processorSubscriptionId: string, change: CancellationKind | 'resume', actor: string) {
      const command: CancellationCommand =
        change === 'resume'
          ? { type: 'ResumeSubscription', processor, processorSubscriptionId }
          : { type: 'CancelSubscription', processor, processorSubscriptionId, kind: change, now: new Date() };
      return (await accountCommand(ledger, requireId(accountId, 'account_id'), command, metadataFor(actor))).events;
    },
    /** Refused codes the account may still send this UTC hour, as every gateway counts them (read from the log). */
    async codeAttemptsLeft(accountId: string, limit: number, now = new Date()): Promise<number> {
      const { refused } = await ledger.streamState(codeAttemptsDecider, streams.codeAttempts(accountId, utcHour(now)));
      return Math.max(0, limit - refused);
    },
    /** Counts a refused code; false when the hour's limit was reached already (nothing recorded: answer 429). */
    async countRefusedCode(accountId: string, limit: number, actor: string, now = new Date()): Promise<boolean> {
      const hour = utcHour(now);
      const res = await ledger.command(
        codeAttemptsDecider,
        streams.codeAttempts(accountId, hour),
        { type: 'Refuse', accountId, hour, limit },
        metadataFor(actor),
      );
      return res.events.length > 0;
    },
    /** Mints a batch: the codes are returned once, only their hashes are kept. */
    async mintCodes(b: { count: unknown; amount: unknown; currency?: unknown; expiresAt: Date | null; planId?: unknown; packId?: unknown }, actor: string) {
      const count = requireTokenAmount(b.count, 'count');
      if (count > MAX_CODES_PER_BATCH) throw invalid(`count must be from 1 to ${MAX_CODES_PER_BATCH}`, { param: 'count' });
      const { item } = await resolve(purchaseOf(b.planId, b.packId));
      const currency = await requireSettlementCurrency(b.currency ?? (await priceList()).currency);
      const batchId = newBatchId();
      const codes = Array.from({ length: count }, () => generateCode(batchId));
      await ledger.command(
        codeBatchDecider,
        streams.codeBatch(batchId),
        {
          type: 'Mint',
          batch: {
            batchId,
            item,
            amount: requireMinorUnits(b.amount, 'amount', { allowZero: true }),
            currency,
            expiresAt: b.expiresAt ? b.expiresAt.toISOString() : null,
            hashes: codes.map(hashKey),
          },
        },
        metadataFor(actor),
      );
      return { batchId, codes, item, currency };
    },
    /**
     * Redeems a code for an account. Resolves to the payment, or null when the code is unknown,
     * expired or already redeemed (all the same to the caller, so nothing can be learned by guessing).
     */
    async redeem(accountId: string, code: unknown, actor: string, now = new Date()): Promise<{ paymentId: string; item: PaidItem } | null> {
      const parsed = parseCode(code);
      if (!parsed) throw invalid('code must look like tgc_xxxxxxxxxx_xxxxxxxxxxxxxxxxxxxx', { param: 'code' });
      const { batch } = await ledger.streamState(codeBatchDecider, streams.codeBatch(parsed.batchId));
      if (!batch || !batch.hashes.includes(parsed.hash)) return null;
      if (batch.expiresAt && Date.parse(batch.expiresAt) <= now.getTime()) return null;
      const purchase: Purchase = batch.item.kind === 'plan' ? { planId: batch.item.planId } : { packId: batch.item.packId };
      const res = await recordPayment({
        accountId,
        processor: 'code',
        processorPaymentId: parsed.hash,
        amount: batch.amount,
        currency: batch.currency,
        fee: null,
        reference: `code batch ${batch.batchId}`,
        purchase,
        packTokens: batch.item.kind === 'pack' ? batch.item.tokens : undefined,
        actor,
        now,
      });
      return res.recorded ? { paymentId: res.paymentId, item: batch.item } : null;
    },
  };
}

export type Payments = ReturnType<typeof createPayments>;
