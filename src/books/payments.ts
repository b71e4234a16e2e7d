// Payments as the gateway takes them: the price list, manual payments, refunds and disputes,
// redemption codes. Each resolves what was bought against the price list and the plan's terms,
// then appends through the account decider, where payment and grant are one decision.
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor, requireId } from '../ledger/ledger.ts';
import { streams, type DomainEvent, type PaidItem, type PaymentFacts, type PaymentProcessor } from '../ledger/events.ts';
import { DomainError, invalid, requireTokenAmount } from '../ledger/errors.ts';
import { DuplicateEventError } from '../eventstore/errors.ts';
import { uuidFrom } from '../ledger/event-ids.ts';
import { priceListDecider, type PackCredit, type PriceListState } from './prices.ts';
import { codeBatchDecider, generateCode, newBatchId, parseCode, MAX_CODES_PER_BATCH } from './codes.ts';
import { currencyOf, requireMinorUnits, type Money } from '../money/money.ts';
import { hashKey } from '../keys/index.ts';
import type { CancellationCommand, CancellationKind, PaidLot, RecordPaymentCommand } from '../accounts/index.ts';
import { codeAttemptsDecider, utcHour } from './code-attempts.ts';
import { billingProfileDecider } from './billing-profile.ts';
import { NO_TAX, taxApplied, taxTreatment, type TaxSettings, type TaxTreatment } from '../money/tax.ts';
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

  /** The grant a purchase makes, and its current list price (null when it has none). */
  async function resolve(p: Purchase): Promise<{ grant: RecordPaymentCommand['grant']; item: PaidItem; listPrice: Money | null }> {
    const prices = await priceList();
    if ('planId' in p) {
      const plan = await knownPlan(p.planId);
      const price = prices.plans[p.planId];
      return {
        grant: { kind: 'plan', plan },
        item: { kind: 'plan', planId: plan.planId, tokens: plan.quota },
        listPrice: price?.active ? { amount: price.amount, currency: price.currency } : null,
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
      listPrice: pack.active ? { amount: pack.amount, currency: pack.currency } : null,
    };
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
      actor: string;
      now?: Date;
    },
  ): Promise<{ paymentId: string; recorded: boolean; events: DomainEvent[] }> {
    const resolved = (await resolve(input.purchase)).grant;
    const grant = resolved.kind === 'pack' && input.packTokens ? { ...resolved, tokens: input.packTokens } : resolved;
    const paymentId = paymentIdFor(input.processor, input.processorPaymentId);
    // A code's payment was taxed where the code was sold; every other amount holds the tax of the buyer's country.
    const applied = input.processor === 'code' ? null : taxApplied(input.amount, await taxTreatmentFor(input.accountId));
    const command: RecordPaymentCommand = {
      type: 'RecordPayment',
      paymentId,
      processor: input.processor,
      processorPaymentId: input.processorPaymentId,
      amount: input.amount,
      currency: input.currency,
      fee: input.fee,
      reference: input.reference,
      grant,
      ...(applied ? { tax: applied } : {}),
      now: input.now ?? new Date(),
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
      const currency = await requireSettlementCurrency(b.currency);
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
    /** A refund of part or all of a payment (idempotent by refund id). */
    async refund(accountId: string, paymentId: string, amount: unknown, refundId: string, actor: string, now = new Date()) {
      requireMinorUnits(amount, 'amount');
      const res = await accountCommand(
        ledger,
        requireId(accountId, 'account_id'),
        { type: 'RefundPayment', paymentId, refundId, amount: amount as number, now },
        metadataFor(actor),
      );
      return res.events;
    },
    async openDispute(accountId: string, paymentId: string, disputeId: string, amount: number, suspendKeys: boolean, actor: string) {
      return (await accountCommand(ledger, accountId, { type: 'OpenDispute', paymentId, disputeId, amount, suspendKeys }, metadataFor(actor))).events;
    },
    async closeDispute(accountId: string, disputeId: string, outcome: 'won' | 'lost', fee: number, actor: string, now = new Date()) {
      return (await accountCommand(ledger, accountId, { type: 'CloseDispute', disputeId, outcome, fee, now }, metadataFor(actor))).events;
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
