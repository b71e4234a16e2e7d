// The expected state of a ledger shared by several gateways, for the seeded random replica suite
// (test/replica-random.test.ts): a seeded PRNG, the state a run has built so far (accounts and their
// money, keys, management keys, members, plans, the model catalogue, channels) and the rules that
// say what a call or a refund must give on that state. The rules are docs/billing.md's, docs/payments.md's and DESIGN.md's,
// written again here from the documents (not imported from src/), so that a gateway that drifts
// from them disagrees with the model instead of agreeing with itself:
//   - a chat call costs ceil((prompt + completion) x milli / 1000), an image ceil(45000 x milli / 1000);
//   - a hold is the call's upper bound, the completion capped at what the balance (and the key's
//     limit) covers; a charge is never more than what the account and the key's limit still cover;
//   - the main plan is spent first, then extra tokens (oldest pack first);
//   - a refund withdraws the tokens its money bought, as far as they are unused.
import { createRng } from '../../src/upstream/seed.ts';

/** The draws of a run, from one seed (mulberry32, the simulated upstream's own PRNG). */
export class Rng {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = createRng(seed);
  }
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[Math.floor(this.next() * items.length)];
  }
  /** `preferred` with probability p when it is among `items`, else any of them. */
  pickPreferring<T>(items: readonly T[], preferred: T | undefined, p = 0.5): T {
    if (preferred !== undefined && items.includes(preferred) && this.chance(p)) return preferred;
    return this.pick(items);
  }
  weighted<T>(entries: ReadonlyArray<readonly [T, number]>): T {
    const total = entries.reduce((n, [, w]) => n + w, 0);
    let r = this.next() * total;
    for (const [v, w] of entries) {
      r -= w;
      if (r < 0) return v;
    }
    return entries[entries.length - 1][0];
  }
}

// ---------------------------------------------------------------- the state

export type Role = 'owner' | 'admin' | 'billing' | 'developer';

export interface PlanModel {
  id: string;
  name: string;
  quota: number;
  models: string[];
  /** The terms it was defined with (an update may put them back). */
  defined: { quota: number; models: string[] };
}

export interface LotModel {
  paymentId: string;
  /** The manual payment's reference (or the code's) that recorded it. */
  reference: string;
  kind: 'plan' | 'pack';
  amount: number;
  tokens: number;
  refunded: number;
  withdrawn: number;
  /** A pack's place in the extra pool: the extra tokens granted before it, net of withdrawals. */
  extraStart: number;
  /** A plan lot's period: the serial of the subscription it started. */
  period: number;
}

export interface DisputeModel {
  id: string;
  paymentId: string;
  amount: number;
  suspends: boolean;
  outcome: 'won' | 'lost' | null;
}

/** A call the ledger must hold exactly once (charged) or not at all (refused). */
export interface CallRecord {
  requestId: string;
  accountId: string;
  model: string;
  kind: 'chat' | 'image';
  /** null: refused or failed, nothing may be charged. */
  billed: number | null;
  milli: number;
  fromQuota: number;
  fromExtra: number;
  promptTokens: number;
  completionTokens: number;
  images: number;
  /** The channel that must have served it (the model's first enabled channel). */
  channel: string | null;
}

export interface AccountModel {
  id: string;
  plan: { planId: string; quota: number; models: string[]; serial: number } | null;
  subscriptions: number;
  quotaUsed: number;
  extraGranted: number;
  extraUsed: number;
  lots: LotModel[];
  disputes: DisputeModel[];
}

export interface KeyModel {
  /** The test's own name for it (k3), stable across replays. */
  handle: string;
  id: string;
  secret: string;
  accountId: string;
  status: 'active' | 'revoked';
  rotated: boolean;
  /** The key whose spend it shares (itself, or the key it was rotated from). */
  pool: string;
  /** A spend limit over the period 'none' (everything ever spent), or none. */
  limit: number | null;
  models: string[] | null;
}

export interface ManagementKeyModel {
  handle: string;
  id: string;
  secret: string;
  accountId: string;
  status: 'active' | 'revoked';
}

export interface MemberModel {
  handle: string;
  id: string;
  accountId: string;
  email: string;
  role: Role;
  /** The role before its last change (what a "put back" restores). */
  previousRole?: Role;
  status: 'invited' | 'active' | 'removed';
  /** The session cookie once the member signed in. */
  cookie: string | null;
}

export interface CatalogEntry {
  id: string;
  milli: number;
  /** The multiplier it started the run with (what a "put back" restores). */
  original: number;
  status: 'ACTIVE' | 'INACTIVE';
  /** Its channels in the order the models config lists them (tried in that order). */
  channels: string[];
}

export interface Model {
  plans: Map<string, PlanModel>;
  accounts: Map<string, AccountModel>;
  keys: KeyModel[];
  managementKeys: ManagementKeyModel[];
  members: MemberModel[];
  catalog: Map<string, CatalogEntry>;
  channels: Map<string, { enabled: boolean }>;
  /** Billed tokens per key pool (the spend a limit over the period 'none' counts). */
  poolSpend: Map<string, number>;
  calls: CallRecord[];
  /** Unused redemption codes (minted, not redeemed yet) and used ones. */
  codes: Array<{ code: string; used: boolean }>;
}

export function emptyModel(): Model {
  return {
    plans: new Map(),
    accounts: new Map(),
    keys: [],
    managementKeys: [],
    members: [],
    catalog: new Map(),
    channels: new Map(),
    poolSpend: new Map(),
    calls: [],
    codes: [],
  };
}

export function newAccount(id: string): AccountModel {
  return { id, plan: null, subscriptions: 0, quotaUsed: 0, extraGranted: 0, extraUsed: 0, lots: [], disputes: [] };
}

// ---------------------------------------------------------------- money rules

export const TOKENS_PER_IMAGE = 45_000;

/** ceil(tokens x milli / 1000) in integers. */
export const priced = (tokens: number, milli: number): number => Math.floor((tokens * milli + 999) / 1000);

export const mainRemaining = (a: AccountModel): number => (a.plan ? Math.max(0, a.plan.quota - a.quotaUsed) : 0);
export const extraRemaining = (a: AccountModel): number => Math.max(0, a.extraGranted - a.extraUsed);
/** What a new hold may take (no hold is open between steps; plans run 30 days, so the plan is active). */
export const available = (a: AccountModel): number => mainRemaining(a) + extraRemaining(a);

export const suspended = (a: AccountModel): boolean => a.disputes.some((d) => d.outcome === null && d.suspends);

export const planAllows = (models: readonly string[], model: string): boolean => models.includes('*') || models.includes(model);

/** What the key's limit leaves (its pool's spend counted), or Infinity without a limit. */
export function keyAvailable(m: Model, k: KeyModel): number {
  if (k.limit === null) return Number.POSITIVE_INFINITY;
  return Math.max(0, k.limit - (m.poolSpend.get(k.pool) ?? 0));
}

export type CallExpectation =
  | {
      outcome: 'refused';
      status: number;
      code: string | null;
      why: string;
      /** Another code that is as true of the log (a call outside the plan of a suspended account: either 403). */
      or?: string;
    }
  /** Let in: the hold and the most completion tokens it covers (chat), the price bound of an image. */
  | { outcome: 'served'; hold: number; maxCompletion: number; milli: number; accountAvailable: number; keyAvailable: number; channel: string | null }
  /** Let in and held, but no channel of the model is enabled: the call fails (502 upstream_error) and is not charged. */
  | { outcome: 'no_channel'; milli: number };

/**
 * What a call with `key` on `modelId` must get, in the order the gateway checks: the key (401), the
 * model and the caller's plan and key list (403 model_not_found), a dispute (403
 * account_suspended), then the money (402). `promptTokens` is the gateway's own count of the
 * prompt (what it sizes the hold on); `maxTokens` what the caller asked for.
 */
export function expectCall(
  m: Model,
  key: KeyModel,
  modelId: string,
  call: { kind: 'chat'; promptTokens: number; maxTokens: number } | { kind: 'image' },
): CallExpectation {
  if (key.status !== 'active') return { outcome: 'refused', status: 401, code: 'invalid_api_key', why: `key ${key.handle} is revoked` };
  const entry = m.catalog.get(modelId);
  if (!entry) throw new Error(`no model ${modelId} in the model`);
  const account = m.accounts.get(key.accountId)!;
  if (entry.status !== 'ACTIVE') return { outcome: 'refused', status: 403, code: 'model_not_found', why: `${modelId} is INACTIVE` };
  // The route checks the plan and the key's list first; a gateway whose copy of the account still
  // allowed the model lets the account decider refuse it, which checks a dispute first. Both are
  // true of the log, so a suspended account may get either 403.
  const or = suspended(account) ? 'account_suspended' : undefined;
  if (!account.plan || !planAllows(account.plan.models, modelId))
    return {
      outcome: 'refused',
      status: 403,
      code: 'model_not_found',
      or,
      why: `${modelId} is not in the plan of ${account.id} (${account.plan ? account.plan.models.join(',') : 'none'})`,
    };
  if (key.models && !key.models.includes(modelId))
    return { outcome: 'refused', status: 403, code: 'model_not_found', or, why: `${modelId} is not in key ${key.handle}'s list` };
  if (suspended(account)) return { outcome: 'refused', status: 403, code: 'account_suspended', why: `a dispute of ${account.id} is open` };
  const milli = entry.milli;
  const acct = available(account);
  const keyLeft = keyAvailable(m, key);
  const short = (what: number, why: string): CallExpectation =>
    what > acct
      ? { outcome: 'refused', status: 402, code: 'insufficient_quota', why: `${why}: needs ${what}, the account has ${acct}` }
      : { outcome: 'refused', status: 402, code: 'key_limit_exceeded', why: `${why}: needs ${what}, key ${key.handle}'s limit leaves ${keyLeft}` };
  const enabledChannel = entry.channels.find((c) => m.channels.get(c)?.enabled ?? true) ?? null;
  let hold: number;
  let maxCompletion = 0;
  if (call.kind === 'image') {
    hold = priced(TOKENS_PER_IMAGE, milli);
    if (hold > acct || hold > keyLeft) return short(hold, 'an image');
  } else {
    // Refused before the prompt is counted when not even one completion token of no prompt fits.
    const smallest = Math.max(1, priced(1, milli));
    if (smallest > acct || smallest > keyLeft) return short(smallest, 'the smallest call');
    const left = Math.min(acct, keyLeft);
    const bound = (completion: number) => priced(call.promptTokens + completion, milli);
    maxCompletion = call.maxTokens;
    if (bound(maxCompletion) > left) maxCompletion = Math.floor((Math.floor((left * 1_000_000) / milli) - call.promptTokens * 1000) / 1000);
    if (maxCompletion < 1) {
      const needed = bound(1);
      return keyLeft < acct
        ? { outcome: 'refused', status: 402, code: 'key_limit_exceeded', why: `a hold of ${needed}: key ${key.handle}'s limit leaves ${keyLeft}` }
        : { outcome: 'refused', status: 402, code: 'insufficient_quota', why: `a hold of ${needed}: the account has ${acct}` };
    }
    hold = bound(maxCompletion);
  }
  if (!enabledChannel) return { outcome: 'no_channel', milli };
  return { outcome: 'served', hold, maxCompletion, milli, accountAvailable: acct, keyAvailable: keyLeft, channel: enabledChannel };
}

/** What a served call is billed: its price, capped at what the account and the key's limit still cover. */
export function billedFor(price: number, e: Extract<CallExpectation, { outcome: 'served' }>): number {
  return Math.min(price, e.accountAvailable, e.keyAvailable);
}

/** Books a charge: the main plan first, then extra tokens; the key's pool spends it. */
export function applyCharge(m: Model, key: KeyModel, billed: number): { fromQuota: number; fromExtra: number } {
  const account = m.accounts.get(key.accountId)!;
  const fromQuota = Math.min(billed, mainRemaining(account));
  account.quotaUsed += fromQuota;
  account.extraUsed += billed - fromQuota;
  m.poolSpend.set(key.pool, (m.poolSpend.get(key.pool) ?? 0) + billed);
  return { fromQuota, fromExtra: billed - fromQuota };
}

/** round(n / d) half up, for non-negative integers. */
const halfUp = (n: number, d: number): number => Math.floor((2 * n + d) / (2 * d));

/** The tokens `part` of a payment of `paid` bought, on the running total (docs/payments.md's rounding rule). */
export const tokensFor = (part: number, paid: number, tokens: number): number => (paid === 0 ? 0 : halfUp(tokens * part, paid));

/** Of a pack's own tokens, how many the extra pool's use (oldest first) has reached. */
const poolShare = (start: number, own: number, used: number): number => Math.max(0, Math.min(own, used - start));

/** The tokens a refund of `amount` of `lot` withdraws: what the money bought, as far as unused. */
export function refundWithdraws(a: AccountModel, lot: LotModel, amount: number): number {
  const bought = tokensFor(lot.refunded + amount, lot.amount, lot.tokens) - tokensFor(lot.refunded, lot.amount, lot.tokens);
  let unused: number;
  if (lot.kind === 'plan') unused = a.plan && a.plan.serial === lot.period ? mainRemaining(a) : 0;
  else {
    const own = lot.tokens - lot.withdrawn;
    unused = Math.min(extraRemaining(a), own - poolShare(lot.extraStart, own, a.extraUsed));
  }
  return Math.min(bought, Math.max(0, unused));
}

/** Books a refund that withdrew `withdrawn` tokens. */
export function applyRefund(a: AccountModel, lot: LotModel, amount: number, withdrawn: number): void {
  lot.refunded += amount;
  lot.withdrawn += withdrawn;
  if (lot.kind === 'plan') {
    if (a.plan) a.plan.quota -= withdrawn;
    return;
  }
  a.extraGranted -= withdrawn;
  // The packs granted after it move up in the pool.
  for (const other of a.lots) if (other.kind === 'pack' && other.extraStart > lot.extraStart) other.extraStart -= withdrawn;
}

/** A subscription (started or renewed): the plan's terms as they are now, the main quota afresh. */
export function applySubscription(a: AccountModel, plan: { id: string; quota: number; models: string[] }): number {
  a.subscriptions += 1;
  a.plan = { planId: plan.id, quota: plan.quota, models: [...plan.models], serial: a.subscriptions };
  a.quotaUsed = 0;
  return a.subscriptions;
}

/** Active owners of an account (the last one can be neither demoted nor removed). */
export const activeOwners = (m: Model, accountId: string): number =>
  m.members.filter((x) => x.accountId === accountId && x.status === 'active' && x.role === 'owner').length;

/** The roles that may see an account's keys, and its payments (src/ledger/roles.ts, as docs/customers.md's table has it). */
export const MAY_READ_KEYS: readonly Role[] = ['owner', 'admin', 'developer'];
export const MAY_BILL: readonly Role[] = ['owner', 'billing'];

/** Same members as two sets of model ids. */
export const sameSet = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((x) => b.includes(x));
