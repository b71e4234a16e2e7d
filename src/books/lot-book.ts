// The lot book: which lot every token an account uses comes from, and what that use is worth.
// Pure: a fold over the log in order (`applyOwn`, with plan lots ended as LotFold or the books'
// EndingLots find them over), kept out of the account decider so the
// decider's state stays small (issue #31). The books' read models (projections/books/books.ts)
// fold it a page at a time as the projector applies the log; the whole-log fold (finance-fold.ts)
// is their reference and names a reconciliation's unbalanced events. Its memory is
// the lots and accounts, not the log: bookings go to a sink (and are kept only in a window), and a
// correction finds its charge's channel through `channelOf` (the upstream_calls read model).
// Each paid grant is a lot (tokens, money paid); free grants are lots with no value (promotional).
// Charges take tokens as the decider split them (fromQuota: the current plan period's lot;
// fromExtra: the lots with terms by the split the charge recorded, src/accounts/credits.ts, the
// rest the pool of lots without terms, oldest first), and each use books the value of its tokens by the
// cumulative rounding rule (bookedAmount) on that lot. A termed lot's expiry (CreditsExpired) ends
// it: its unused value becomes breakage.
import type { ProjectedEvent } from '../eventstore/port.ts';
import type { EventDataByType } from '../ledger/events.ts';
import { InvariantViolation } from '../ledger/errors.ts';
import { bookedAmount } from '../money/money.ts';
import { assertLot, type Booking, type Lot } from './lot.ts';
import { isTermed, poolShare, type CreditDraw } from '../accounts/index.ts';

export { assertLot, type Booking, type Lot } from './lot.ts';

/** The call a use books revenue for. */
interface ChargeTrail {
  model: string;
  channel: string;
}

export interface AccountLots {
  plan: string | null;
  /** Every plan lot, oldest first. */
  plans: string[];
  /** Extra lots in grant order (a split names a termed lot by its place here), and the use of the pool of those without terms (the decider's extraUsed). */
  extra: string[];
  extraUsed: number;
  pendingPayment: Map<string, EventDataByType['PaymentReceived']>;
}

export interface LotBook {
  lots: Map<string, Lot>;
  /** Per account: its current plan lot and its extra lots, oldest first. */
  accounts: Map<string, AccountLots>;
  /** Bookings of the window, when kept (`keep`). */
  bookings: Booking[];
  /** Per event of the window: the change of deferred revenue it made (the reconciliation's own column). */
  deferredDelta: Map<string, number>;
  /** Which bookings count (their time): the rest only move the lots. */
  inWindow: (at: string) => boolean;
  keep: boolean;
  sink: ((b: Booking) => void) | null;
  /** The channel of a charge, for a correction's bookings ('' when unknown). */
  channelOf: (chargeEventId: string) => string;
}

export const emptyLotBook = (o: Partial<Pick<LotBook, 'inWindow' | 'keep' | 'sink' | 'channelOf'>> = {}): LotBook => ({
  lots: new Map(),
  accounts: new Map(),
  bookings: [],
  deferredDelta: new Map(),
  inWindow: () => true,
  keep: true,
  sink: null,
  channelOf: () => '',
  ...o,
});

function accountOf(b: LotBook, accountId: string) {
  let a = b.accounts.get(accountId);
  if (!a) b.accounts.set(accountId, (a = { plan: null, plans: [], extra: [], extraUsed: 0, pendingPayment: new Map() }));
  return a;
}

function book(
  b: LotBook,
  e: ProjectedEvent,
  l: Pick<Lot, 'accountId' | 'currency'> & { lotId: string | null },
  part: Partial<Booking> & Pick<Booking, 'kind'>,
): void {
  if (!b.inWindow(e.timestamp)) return;
  const booking: Booking = {
    at: e.timestamp,
    eventId: e.id,
    accountId: l.accountId,
    lotId: l.lotId,
    currency: l.currency,
    model: '',
    channel: '',
    amount: 0,
    fee: 0,
    fromDeferred: 0,
    refundedRevenue: 0,
    tax: 0,
    promotionalTokens: 0,
    ...part,
  };
  b.sink?.(booking);
  if (b.keep) b.bookings.push(booking);
}

function moveDeferred(b: LotBook, e: ProjectedEvent, l: Lot, delta: number): void {
  l.deferred += delta;
  if (b.keep && b.inWindow(e.timestamp)) b.deferredDelta.set(e.id, (b.deferredDelta.get(e.id) ?? 0) + delta);
}

function newLot(
  b: LotBook,
  e: ProjectedEvent,
  accountId: string,
  f: Pick<Lot, 'source' | 'paymentId' | 'pool' | 'currency' | 'tokens' | 'paid' | 'carriedIn' | 'rate' | 'expiresAt'>,
  lotId = e.id,
): Lot {
  const l: Lot = {
    lotId,
    accountId,
    used: 0,
    withdrawn: 0,
    valueUsed: 0,
    recognised: 0,
    breakage: 0,
    refunded: 0,
    carriedOut: 0,
    deferred: 0,
    grantedAt: e.timestamp,
    ended: false,
    ...f,
  };
  b.lots.set(l.lotId, l);
  moveDeferred(b, e, l, l.paid + l.carriedIn);
  return l;
}

/** Books `tokens` more used (negative: given back) on a lot, at its rate by the cumulative rule. */
function use(b: LotBook, e: ProjectedEvent, l: Lot, tokens: number, trail: { model: string; channel: string }): void {
  if (tokens === 0) return;
  const usedAfter = l.used + tokens;
  const valueAfter = l.valueUsed + bookedAmount(l.rate, l.used, usedAfter);
  // Where the value of unused tokens sits: deferred, or breakage once the lot's period has ended
  // (tokens used or given back after the end move value between revenue and breakage).
  const unusedValue = l.ended ? l.breakage : l.deferred;
  let amount = valueAfter - l.valueUsed;
  // The last token takes what is left: the uses' and the withdrawals' rounded parts are each exact,
  // their sum may differ from the whole by a unit.
  if (!l.ended && l.tokens - l.withdrawn - usedAfter === 0) amount = l.deferred;
  amount = Math.max(Math.min(amount, unusedValue), -l.recognised);
  l.used = usedAfter;
  l.valueUsed = valueAfter;
  l.recognised += amount;
  if (l.ended) {
    l.breakage -= amount;
    if (amount !== 0) book(b, e, l, { kind: 'breakage', amount: -amount });
  } else moveDeferred(b, e, l, -amount);
  book(b, e, l, { kind: 'use', amount, model: trail.model, channel: trail.channel, promotionalTokens: l.source === 'free' ? tokens : 0 });
  assertLot(l);
}

/** Ends a plan lot (renewed or expired): its unused value becomes breakage at `at`. */
function endLot(b: LotBook, e: ProjectedEvent, l: Lot, at: string): void {
  if (l.ended) return;
  l.ended = true;
  const amount = l.deferred;
  l.breakage += amount;
  moveDeferred(b, e, l, -amount);
  if (amount !== 0) book(b, { ...e, timestamp: at }, l, { kind: 'breakage', amount });
  assertLot(l);
}

/**
 * Moves the extra tokens used by `delta` (a charge: more; a correction: more or fewer): the termed
 * lots by the split the event recorded (src/accounts/credits.ts), the rest by the pool of lots
 * without terms, whose lots' uses are each its poolShare of the pool's use: tokens are taken
 * oldest lot first and given back newest first, as the decider counts the pool, so a refund's
 * withdrawal and the lot agree on every lot.
 */
function moveExtraUsed(b: LotBook, e: ProjectedEvent, a: AccountLots, delta: number, recorded: readonly CreditDraw[] | undefined, trail: ChargeTrail): void {
  if (delta === 0) return;
  let termed = 0;
  for (const d of recorded ?? []) {
    const l = a.extra[d.lot] === undefined ? undefined : b.lots.get(a.extra[d.lot]);
    if (!l || !l.termed) throw new InvariantViolation(`a split names extra lot ${d.lot}, which is not a lot with terms`);
    use(b, e, l, d.tokens, trail);
    termed += d.tokens;
  }
  const poolDelta = delta - termed;
  if (poolDelta === 0) return;
  const after = a.extraUsed + poolDelta;
  let start = 0;
  for (const id of a.extra) {
    const l = b.lots.get(id)!;
    if (l.termed) continue;
    const own = l.tokens - l.withdrawn;
    const n = poolShare(start, own, after) - l.used;
    if (n !== 0) use(b, e, l, n, trail);
    start += own;
  }
  if (after < 0 || after > start) throw new InvariantViolation(`account's extra pool of ${start} tokens cannot have ${after} used`);
  a.extraUsed = after;
}

/**
 * The events the lot book folds: the others neither book money nor move its clock. A month's close
 * moves the clock only: the plan lots that ended before it are booked before the month is closed.
 */
export const BOOK_EVENT_TYPES: ReadonlySet<string> = new Set([
  'PeriodClosed',
  'SettlementCurrencySet',
  'PaymentReceived',
  'SubscriptionStarted',
  'SubscriptionRenewed',
  'ExtraTokensGranted',
  'CreditsExpired',
  'ChatCharged',
  'ImageCharged',
  'ChargeAdjusted',
  'PaymentRefunded',
  'DisputeClosed',
]);

/** When the account's current plan lot ends, if it has not yet (null: never, or already ended). */
export function nextExpiry(b: LotBook, accountId: string): string | null {
  const a = b.accounts.get(accountId);
  const l = a?.plan ? b.lots.get(a.plan) : undefined;
  return l && !l.ended ? l.expiresAt : null;
}

/** The account's plan lot if its period is over by `at` and it has not ended yet. */
export function dueLot(b: LotBook, accountId: string, at: string): Lot | null {
  const a = b.accounts.get(accountId);
  const l = a?.plan ? b.lots.get(a.plan) : undefined;
  return l && !l.ended && l.expiresAt !== null && l.expiresAt <= at ? l : null;
}

/** Ends the account's plan lot if its period is over by `at`; returns it then. */
export function expireAccount(b: LotBook, accountId: string, at: string, e: ProjectedEvent): Lot | null {
  const l = dueLot(b, accountId, at);
  if (l) endLot(b, { ...e, id: `${l.lotId}:end` }, l, l.expiresAt!);
  return l;
}

/** The event itself, once every plan lot that ended before it has been ended (LotFold, or the books' EndingLots). */
export function applyOwn(b: LotBook, e: ProjectedEvent, currency: string): void {
  const t = e.type as keyof EventDataByType;
  switch (t) {
    case 'PaymentReceived': {
      const d = e.data as unknown as EventDataByType['PaymentReceived'];
      accountOf(b, d.accountId).pendingPayment.set(d.paymentId, d);
      return;
    }
    case 'SubscriptionStarted':
    case 'SubscriptionRenewed': {
      const d = e.data as unknown as EventDataByType['SubscriptionStarted'];
      const a = accountOf(b, d.accountId);
      const old = a.plan ? b.lots.get(a.plan) : undefined;
      if (old) endLot(b, e, old, e.timestamp);
      a.plan = grantLot(b, e, a, d.accountId, d.quota, d.paymentId, 'main', d.expiresAt, currency).lotId;
      a.plans.push(a.plan);
      return;
    }
    case 'ExtraTokensGranted': {
      const d = e.data as unknown as EventDataByType['ExtraTokensGranted'];
      const a = accountOf(b, d.accountId);
      const l = grantLot(b, e, a, d.accountId, d.amount, d.paymentId, 'extra', d.expiresAt ?? null, currency);
      if (isTermed(d)) l.termed = true;
      a.extra.push(l.lotId);
      return;
    }
    case 'CreditsExpired': {
      const d = e.data as unknown as EventDataByType['CreditsExpired'];
      const id = accountOf(b, d.accountId).extra[d.lot];
      const l = id ? b.lots.get(id) : undefined;
      if (!l) throw new InvariantViolation(`credits expired on extra lot ${d.lot} of account ${d.accountId}, which does not exist`);
      endLot(b, e, l, e.timestamp);
      return;
    }
    case 'ChatCharged':
    case 'ImageCharged': {
      const d = e.data as unknown as EventDataByType['ChatCharged'];
      const a = accountOf(b, d.accountId);
      const trail: ChargeTrail = { model: d.model, channel: d.channel ?? '' };
      if (d.fromQuota > 0) use(b, e, requirePlan(b, a.plan), d.fromQuota, trail);
      moveExtraUsed(b, e, a, d.fromExtra, d.credits, trail);
      return;
    }
    case 'ChargeAdjusted': {
      const d = e.data as unknown as EventDataByType['ChargeAdjusted'];
      const a = accountOf(b, d.accountId);
      const trail: ChargeTrail = { model: d.model, channel: b.channelOf(d.chargeEventId) };
      if (d.quotaDelta !== 0) use(b, e, requirePlan(b, a.plan), d.quotaDelta, trail);
      moveExtraUsed(b, e, a, d.extraDelta, d.credits, trail);
      // The plan lot of the charge's period: the latest granted at or before the charge.
      const origin = a.plans
        .map((id) => b.lots.get(id)!)
        .reverse()
        .find((l) => l.grantedAt <= d.chargedAt);
      if (d.extraCredited) returnTokens(b, e, a, d.accountId, trail, origin, d.extraCredited, currency);
      return;
    }
    case 'PaymentRefunded': {
      const d = e.data as unknown as EventDataByType['PaymentRefunded'];
      const l = [...b.lots.values()].find((x) => x.paymentId === d.paymentId && x.accountId === d.accountId);
      if (!l) throw new InvariantViolation(`refund ${d.refundId}: no lot for payment ${d.paymentId}`);
      refund(b, e, l, d);
      return;
    }
    case 'DisputeClosed': {
      const d = e.data as unknown as EventDataByType['DisputeClosed'];
      if (d.fee > 0) book(b, e, { accountId: d.accountId, currency, lotId: null }, { kind: 'dispute_fee', amount: d.fee });
      return;
    }
    default:
      return;
  }
}

function requirePlan(b: LotBook, id: string | null): Lot {
  const l = id ? b.lots.get(id) : undefined;
  if (!l) throw new InvariantViolation('a charge takes tokens from the main plan of an account without a plan lot');
  return l;
}

function grantLot(
  b: LotBook,
  e: ProjectedEvent,
  a: ReturnType<typeof accountOf>,
  accountId: string,
  tokens: number,
  paymentId: string | undefined,
  pool: 'main' | 'extra',
  expiresAt: string | null,
  currency: string,
): Lot {
  const p = paymentId ? a.pendingPayment.get(paymentId) : undefined;
  if (p) a.pendingPayment.delete(paymentId!);
  // The lot's value is what was paid less the tax it held: that part is owed, never deferred revenue.
  const tax = p?.tax?.amount ?? 0;
  const paid = (p?.amount ?? 0) - tax;
  const l = newLot(b, e, accountId, {
    source: p ? (p.processor === 'code' ? 'code' : 'payment') : 'free',
    paymentId: paymentId ?? null,
    pool,
    currency: p?.currency ?? currency,
    tokens,
    paid,
    carriedIn: 0,
    rate: { amount: paid, per: Math.max(1, tokens) },
    expiresAt,
  });
  if (p) book(b, e, l, { kind: 'payment', amount: p.amount, fee: p.fee ?? 0, tax });
  assertLot(l);
  return l;
}

/**
 * Tokens a correction gives back after their plan period ended: a new extra lot carrying the value
 * they had (moved from revenue back to deferred on their own lot).
 */
function returnTokens(
  b: LotBook,
  e: ProjectedEvent,
  a: ReturnType<typeof accountOf>,
  accountId: string,
  trail: ChargeTrail,
  origin: Lot | undefined,
  tokens: number,
  currency: string,
): void {
  let value = 0;
  if (origin && origin.used >= tokens) {
    const after = origin.valueUsed + bookedAmount(origin.rate, origin.used, origin.used - tokens);
    value = Math.min(origin.recognised, origin.valueUsed - after);
    origin.used -= tokens;
    origin.valueUsed = after;
    origin.recognised -= value;
    origin.carriedOut += value;
    book(b, e, origin, { kind: 'use', amount: -value, model: trail.model, channel: trail.channel });
    assertLot(origin);
  }
  const l = newLot(
    b,
    e,
    accountId,
    {
      source: 'returned',
      paymentId: null,
      pool: 'extra',
      currency: origin?.currency ?? currency,
      tokens,
      paid: 0,
      carriedIn: value,
      rate: { amount: value, per: Math.max(1, tokens) },
      expiresAt: null,
    },
    `${e.id}:returned`,
  );
  a.extra.push(l.lotId);
}

/** A refund or lost dispute: its tax goes back to the payer, its unused tokens leave the lot (deferred), the rest was revenue. */
function refund(b: LotBook, e: ProjectedEvent, l: Lot, d: EventDataByType['PaymentRefunded']): void {
  // The refund withdraws from its own lot; the decider's figures say how much was still unused.
  const withdrawn = Math.min(d.tokensWithdrawn, l.tokens - l.withdrawn - l.used);
  const tax = d.taxRefunded ?? 0;
  const net = d.amount - tax;
  // Deferred first. The decider's split reads the same lot's unused tokens, so these bounds only
  // guard the invariant: never more revenue taken back than the lot recognised, nor more deferred than it holds.
  const fromDeferred = Math.min(Math.max(d.fromDeferred, net - l.recognised), l.deferred, net);
  const refundedRevenue = net - fromDeferred;
  l.withdrawn += withdrawn;
  l.refunded += net;
  l.recognised -= refundedRevenue;
  moveDeferred(b, e, l, -fromDeferred);
  book(b, e, l, { kind: d.reason === 'dispute_lost' ? 'dispute' : 'refund', amount: d.amount, fromDeferred, refundedRevenue, tax });
  // Paid in another currency: booked back at the payment's rate; what the day's rate made it cost more or less is FX.
  if (d.fx && d.fx.gainLoss !== 0) book(b, e, l, { kind: 'fx', amount: d.fx.gainLoss });
  assertLot(l);
}
