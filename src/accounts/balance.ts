// The money rule, defined once: whether the main plan counts, what remains of it and of the extra
// tokens, what a new hold may take, and which pool a charge comes from. The account decider, the
// metering and the read endpoints all ask here, whether their figures come from the account
// stream or from its read model.
import { InvariantViolation } from '../ledger/errors.ts';
import { creditsAvailable, drawCredits, poolLot, POOL, type CreditDraw, type CreditLot } from './credits.ts';

/** An account's money as any view of it holds it. */
export interface Balance {
  /** The main plan's quota (0 without a plan). */
  quota: number;
  quotaUsed: number;
  /** The pool of extra tokens without terms (a view without `credits`: every extra token). */
  extraGranted: number;
  extraUsed: number;
  /** The lots of credit with terms, where the view keeps them (the account's state). */
  credits?: readonly CreditLot[];
  /** Tokens held by calls in flight. */
  reserved: number;
  /** The main plan's window, ISO 8601; null without a plan. */
  startsAt: string | null;
  expiresAt: string | null;
}

/** The main plan counts from its start until its expiry. */
export const isPlanActive = (b: Balance, now: Date): boolean =>
  b.startsAt !== null && b.expiresAt !== null && now.getTime() >= Date.parse(b.startsAt) && now.getTime() < Date.parse(b.expiresAt);

export const mainRemaining = (b: Balance): number => Math.max(0, b.quota - b.quotaUsed);
/** Every lot a charge may draw on: the termed lots and the pool. */
export const creditViews = (b: Balance): CreditLot[] => [...(b.credits ?? []), poolLot(b.extraGranted, b.extraUsed)];

/** Extra tokens a charge for `model` at `at` may draw (every model's, expiry counted only with `at`). */
export const extraRemaining = (b: Balance, at: Date | null = null, model: string | null = null): number => creditsAvailable(creditViews(b), model, at);

/** Tokens a new hold may take now: the main plan only while it is active, then the extra tokens the model may draw, less what is held. */
export function availableTokens(b: Balance, now: Date, model: string | null = null): number {
  const main = isPlanActive(b, now) ? mainRemaining(b) : 0;
  return Math.max(0, main + extraRemaining(b, now, model) - b.reserved);
}

/**
 * The main plan first, then extra tokens, split over their lots by the draw-down rule for the
 * charge's model at its hold's time. A charge is capped at what the account holds (its own hold
 * at least); the upstream's count can exceed the hold only as far as the balance covers it.
 */
export function splitCharge(
  b: Balance,
  holdAmount: number,
  billed: number,
  model: string | null = null,
  at: Date | null = null,
): { billed: number; fromQuota: number; fromExtra: number; credits?: CreditDraw[] } {
  const othersReserved = b.reserved - holdAmount;
  const coverable = Math.max(holdAmount, mainRemaining(b) + extraRemaining(b, at, model) - othersReserved);
  const charged = Math.min(billed, coverable);
  const fromQuota = Math.min(charged, mainRemaining(b));
  const fromExtra = charged - fromQuota;
  // The termed lots' part is recorded; the rest is the pool's (past it too, if the charge overran every lot).
  const termed = fromExtra > 0 && b.credits?.length ? drawCredits(creditViews(b), fromExtra, model, at).draws.filter((d) => d.lot !== POOL) : [];
  return termed.length ? { billed: charged, fromQuota, fromExtra, credits: termed } : { billed: charged, fromQuota, fromExtra };
}

/**
 * What must hold after every change of an account's money, whatever the rule's callers do: held
 * tokens and used tokens are never negative, and the main plan is never used past its quota
 * (a correction that charges more takes the rest from extra tokens). A broken rule fails here,
 * loudly, instead of turning into a wrong balance.
 */
export function assertBalance(b: Balance, holdsTotal?: number): void {
  if (!(b.reserved >= 0)) throw new InvariantViolation(`reserved ${b.reserved} < 0`);
  if (holdsTotal !== undefined && holdsTotal !== b.reserved) throw new InvariantViolation(`reserved ${b.reserved} != sum of open holds ${holdsTotal}`);
  if (!(b.quotaUsed >= 0) || !(b.extraUsed >= 0)) throw new InvariantViolation(`used below zero (quota ${b.quotaUsed}, extra ${b.extraUsed})`);
  if (b.quotaUsed > b.quota) throw new InvariantViolation(`main plan used ${b.quotaUsed} > quota ${b.quota}`);
}

// ---------------------------------------------------------------- a key's spend limit
// A key may have its own limit in billed tokens per UTC period, on top of the account's money:
// a hold must fit in both. The key's spend is counted per UTC day of the hold that led to each
// charge (a call is counted in the period it was let in), its open holds count while they are
// open, and a charge is capped so that no period's charges pass the limit.

export type LimitPeriod = 'none' | 'daily' | 'weekly' | 'monthly';
export const LIMIT_PERIODS: readonly LimitPeriod[] = ['none', 'daily', 'weekly', 'monthly'];
export const isLimitPeriod = (v: unknown): v is LimitPeriod => typeof v === 'string' && (LIMIT_PERIODS as readonly string[]).includes(v);

export interface SpendLimit {
  tokens: number;
  period: LimitPeriod;
}

/** What a key (with the keys that took over its spend by rotation) has spent and holds. */
export interface KeySpend {
  /** Billed tokens by UTC day (YYYY-MM-DD) of the hold each charge settled; the last KEY_SPEND_DAYS days. */
  byDay: Readonly<Record<string, number>>;
  /** Every billed token charged (the spend of the period 'none'). */
  total: number;
  /** Tokens held by the open holds. */
  reserved: number;
}

/** Days of spend kept per key: more than the longest period (a month) back from its latest charge. */
export const KEY_SPEND_DAYS = 40;

export const noSpend = (): KeySpend => ({ byDay: {}, total: 0, reserved: 0 });

export const utcDay = (at: Date): string => at.toISOString().slice(0, 10);

/**
 * The UTC period `at` falls in, [start, end): a day from 00:00, a week from Monday 00:00, a month
 * from the 1st 00:00. The period 'none' never resets: both bounds are null.
 */
export function periodOf(period: LimitPeriod, at: Date): { start: Date | null; end: Date | null } {
  const y = at.getUTCFullYear();
  const m = at.getUTCMonth();
  const d = at.getUTCDate();
  switch (period) {
    case 'none':
      return { start: null, end: null };
    case 'daily':
      return { start: new Date(Date.UTC(y, m, d)), end: new Date(Date.UTC(y, m, d + 1)) };
    case 'weekly': {
      const monday = d - ((at.getUTCDay() + 6) % 7);
      return { start: new Date(Date.UTC(y, m, monday)), end: new Date(Date.UTC(y, m, monday + 7)) };
    }
    case 'monthly':
      return { start: new Date(Date.UTC(y, m, 1)), end: new Date(Date.UTC(y, m + 1, 1)) };
  }
}

/** Billed tokens charged in the period that `at` falls in. */
export function spentInPeriod(s: KeySpend, period: LimitPeriod, at: Date): number {
  if (period === 'none') return s.total;
  const { start, end } = periodOf(period, at);
  const from = utcDay(start!);
  const to = utcDay(end!);
  let sum = 0;
  for (const [day, tokens] of Object.entries(s.byDay)) if (day >= from && day < to) sum += tokens;
  return sum;
}

/** Tokens a new hold of the key may take now: the limit less the period's spend and the open holds (no limit: unbounded). */
export function keyAvailableTokens(limit: SpendLimit | null, s: KeySpend, now: Date): number {
  if (!limit) return Number.POSITIVE_INFINITY;
  return Math.max(0, limit.tokens - spentInPeriod(s, limit.period, now) - s.reserved);
}

/**
 * The most a charge settling a hold of the key may bill: like the account's cap (splitCharge),
 * the hold at least, and beyond it only what the key's limit still covers in the hold's period
 * with the key's other open holds set aside.
 */
export function keyChargeCap(limit: SpendLimit | null, s: KeySpend, holdAmount: number, holdAt: Date | null): number {
  if (!limit) return Number.POSITIVE_INFINITY;
  const spent = holdAt ? spentInPeriod(s, limit.period, holdAt) : s.total;
  return Math.max(holdAmount, limit.tokens - spent - (s.reserved - holdAmount));
}

/** The key's spend after a charge of `billed` tokens for a hold taken at `holdAt` (its day kept, days too old dropped). */
export function addKeySpend(s: KeySpend, billed: number, holdAt: Date | null): KeySpend {
  if (billed === 0) return s;
  if (!holdAt) return { ...s, total: s.total + billed };
  const day = utcDay(holdAt);
  const oldest = utcDay(new Date(holdAt.getTime() - KEY_SPEND_DAYS * 86_400_000));
  const byDay: Record<string, number> = {};
  for (const [d, tokens] of Object.entries(s.byDay)) if (d >= oldest) byDay[d] = tokens;
  byDay[day] = (byDay[day] ?? 0) + billed;
  return { byDay, total: s.total + billed, reserved: s.reserved };
}

/** A key's spend is never negative and its held tokens are its open holds'. */
export function assertKeySpend(pool: string, s: KeySpend, holdsTotal: number): void {
  if (!(s.reserved >= 0) || !(s.total >= 0)) throw new InvariantViolation(`key ${pool}: reserved ${s.reserved} or spent ${s.total} < 0`);
  if (s.reserved !== holdsTotal) throw new InvariantViolation(`key ${pool}: reserved ${s.reserved} != sum of its open holds ${holdsTotal}`);
}
