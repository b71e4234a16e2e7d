// Extra tokens as lots of credit. A grant (a pack, an operator's grant) may carry terms: an expiry,
// a priority, a scope of models. Grants without terms (and tokens a correction gave back) share
// one pool, used oldest first, which the draw-down order places as one lot without terms. The
// rule is defined here once: the account decider decides each charge's split with it and records
// the termed lots' part on the charge (the rest is the pool's), and the lot book books that split.
import { invalid, InvariantViolation } from '../ledger/errors.ts';

/** What a grant of credit may carry. */
export interface CreditTerms {
  /** When its unused tokens expire (ISO 8601); null: never. */
  expiresAt: string | null;
  /** Lower numbers are drawn first (1 to 100). */
  priority: number;
  /** The models it may pay for; null: every model. */
  models: string[] | null;
}

export interface CreditLot extends CreditTerms {
  /** Its place in the account's grants of extra tokens (0: the first); the pool is POOL. */
  lot: number;
  /** Tokens granted, less those a refund withdrew and those that expired. */
  tokens: number;
  used: number;
  /** Tokens that expired unused (taken out of `tokens` when the lot closed). */
  expired: number;
  /** Expired (CreditsExpired): nothing more is drawn from it or given back to it. */
  closed: boolean;
}

/** Tokens moved on one lot (by its place in the account's grants): used, or given back when negative. */
export interface CreditDraw {
  lot: number;
  tokens: number;
}

export const DEFAULT_PRIORITY = 50;
/** The pool of extra tokens without terms, as a lot of the draw-down order. */
export const POOL = -1;
export const NO_TERMS: CreditTerms = { expiresAt: null, priority: DEFAULT_PRIORITY, models: null };
export const MAX_CREDIT_MODELS = 50;

export const unusedOf = (l: CreditLot): number => Math.max(0, l.tokens - l.used);

/** Open, and (when `at` is given) not past its expiry at `at`. */
export const isLive = (l: CreditLot, at: Date | null): boolean => !l.closed && (l.expiresAt === null || at === null || Date.parse(l.expiresAt) > at.getTime());

const mayPayFor = (l: CreditLot, model: string | null): boolean => l.models === null || model === null || l.models.includes(model);

/** Priority, then the earliest expiry (none last), then the oldest. */
function byPriority(lots: readonly CreditLot[], a: number, b: number): number {
  const x = lots[a];
  const y = lots[b];
  if (x.priority !== y.priority) return x.priority - y.priority;
  const ex = x.expiresAt === null ? Infinity : Date.parse(x.expiresAt);
  const ey = y.expiresAt === null ? Infinity : Date.parse(y.expiresAt);
  if (ex !== ey) return ex - ey;
  return x.lot - y.lot;
}

/**
 * The lots a charge for `model` at `at` may draw from, in draw-down order: the lots scoped to
 * the model first, then by priority, the earliest expiry, the oldest.
 */
export function drawOrder(lots: readonly CreditLot[], model: string | null, at: Date | null): number[] {
  const scoped = (i: number) => (lots[i].models !== null ? 0 : 1);
  return lots
    .map((_, i) => i)
    .filter((i) => isLive(lots[i], at) && mayPayFor(lots[i], model))
    .sort((a, b) => scoped(a) - scoped(b) || byPriority(lots, a, b));
}

/** Unused tokens a charge for `model` at `at` may draw (every live lot's when `model` is null). */
export function creditsAvailable(lots: readonly CreditLot[], model: string | null, at: Date | null): number {
  let sum = 0;
  for (const i of drawOrder(lots, model, at)) sum += unusedOf(lots[i]);
  return sum;
}

/**
 * Splits `tokens` over the lots: a use (positive) takes from the lots in draw-down order; a
 * return (negative) goes back to the live lots in the reverse order, each up to what it has used.
 * A use the model's lots cannot cover takes the rest from the other live lots (holds on lots of
 * several scopes can meet at one lot; the account is never overdrawn for a scope). `rest` is what
 * no lot could take.
 */
export function drawCredits(lots: readonly CreditLot[], tokens: number, model: string | null, at: Date | null): { draws: CreditDraw[]; rest: number } {
  const draws: CreditDraw[] = [];
  const first = drawOrder(lots, model, at);
  const others = drawOrder(lots, null, at).filter((i) => !first.includes(i));
  let rest = Math.abs(tokens);
  const order = tokens > 0 ? [...first, ...others] : [...first, ...others].reverse();
  for (const i of order) {
    if (rest === 0) break;
    const room = tokens > 0 ? unusedOf(lots[i]) : lots[i].used;
    const n = Math.min(room, rest);
    if (n === 0) continue;
    draws.push({ lot: lots[i].lot, tokens: tokens > 0 ? n : -n });
    rest -= n;
  }
  return { draws, rest: tokens > 0 ? rest : -rest };
}

/** The termed lots after a split's draws (the pool's are not theirs); a draw past a lot's bounds is a broken rule. */
export function applyDraws(lots: readonly CreditLot[], draws: readonly CreditDraw[]): CreditLot[] {
  if (draws.length === 0) return lots as CreditLot[];
  const next = lots.slice();
  for (const d of draws) {
    if (d.lot === POOL) continue;
    const i = next.findIndex((l) => l.lot === d.lot);
    if (i < 0) throw new InvariantViolation(`credit lot ${d.lot} does not exist`);
    const used = next[i].used + d.tokens;
    if (used < 0 || used > next[i].tokens) throw new InvariantViolation(`credit lot ${d.lot}: ${used} used of ${next[i].tokens}`);
    next[i] = { ...next[i], used };
  }
  return next;
}

/** Whether a grant's terms set it apart from the pool: an expiry, a scope, or a priority other than the default. */
export const isTermed = (t: Partial<CreditTerms>): boolean =>
  (t.expiresAt ?? null) !== null || (t.models ?? null) !== null || (t.priority !== undefined && t.priority !== DEFAULT_PRIORITY);

/** The pool as a lot of the draw-down order. */
export const poolLot = (granted: number, used: number): CreditLot => ({ ...grantedLot(POOL, granted), used });

export const grantedLot = (lot: number, tokens: number, terms: Partial<CreditTerms> = {}): CreditLot => ({
  lot,
  tokens,
  used: 0,
  expired: 0,
  closed: false,
  expiresAt: terms.expiresAt ?? null,
  priority: terms.priority ?? DEFAULT_PRIORITY,
  models: terms.models ?? null,
});

/** The lots due to expire by `now` and still open: each with its unused tokens. */
export function dueToExpire(lots: readonly CreditLot[], now: Date): CreditDraw[] {
  const due: CreditDraw[] = [];
  for (const l of lots) if (!l.closed && l.expiresAt !== null && Date.parse(l.expiresAt) <= now.getTime()) due.push({ lot: l.lot, tokens: unusedOf(l) });
  return due;
}

// ---------------------------------------------------------------- input
// A grant's terms as the operator gives them (snake_case, as the admin API and pack prices take them).

const fail = (message: string, param: string): never => {
  throw invalid(message, { param });
};

/**
 * Terms from request fields: `expires_at` (ISO 8601, in the future) or `expires_in_days` (1 to
 * 3650), `priority` (1 to 100), `models` (model names). Absent fields take the defaults.
 */
export function requireCreditTerms(b: Record<string, unknown>, now: Date): Partial<CreditTerms> {
  const terms: Partial<CreditTerms> = {};
  if (b.expires_at !== undefined && b.expires_at !== null) {
    if (b.expires_in_days !== undefined) fail('Give expires_at or expires_in_days, not both.', 'expires_at');
    const t = typeof b.expires_at === 'string' ? Date.parse(b.expires_at) : NaN;
    if (!Number.isFinite(t)) fail('expires_at must be an ISO 8601 date and time, e.g. 2027-01-31T23:59:59Z.', 'expires_at');
    if (t <= now.getTime()) fail('expires_at must be in the future.', 'expires_at');
    terms.expiresAt = new Date(t).toISOString();
  } else if (b.expires_in_days !== undefined && b.expires_in_days !== null) {
    const days = requireExpiryDays(b.expires_in_days, 'expires_in_days');
    terms.expiresAt = new Date(now.getTime() + days * 86_400_000).toISOString();
  }
  if (b.priority !== undefined && b.priority !== null) terms.priority = requirePriority(b.priority, 'priority');
  if (b.models !== undefined && b.models !== null) terms.models = requireModels(b.models, 'models');
  return terms;
}

export function requireExpiryDays(v: unknown, param: string): number {
  if (!(Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 3650)) fail(`${param} must be a whole number of days from 1 to 3650.`, param);
  return v as number;
}

export function requirePriority(v: unknown, param: string): number {
  if (!(Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 100)) fail(`${param} must be a whole number from 1 (drawn first) to 100.`, param);
  return v as number;
}

export function requireModels(v: unknown, param: string): string[] {
  const ok =
    Array.isArray(v) &&
    v.length >= 1 &&
    v.length <= MAX_CREDIT_MODELS &&
    v.every((m) => typeof m === 'string' && m.length >= 1 && m.length <= 100) &&
    new Set(v).size === v.length;
  if (!ok) fail(`${param} must be a list of 1 to ${MAX_CREDIT_MODELS} different model names.`, param);
  return v as string[];
}
