// GET /v1/models, /v1/subscription and /v1/usage: answered from the read models.
import type { Context } from 'koa';
import type { CallDeps } from './call-deps.ts';
import { ReadModelsBehind } from '../ledger/read-your-writes.ts';
import { badRequest } from '../http/errors.ts';
import {
  accountsReadModel as accounts,
  balance,
  cancellationBody,
  isModelAllowedForKey,
  isModelEnabled,
  paymentBody,
  paymentsInOrder,
} from '../accounts/index.ts';
import { fromMilli } from '../money/pricing.ts';
import { balanceOf, creditsBody, type AccountRow, type Balance } from '../accounts/index.ts';
import type { UsageRow } from '../../projections/calls/usage-daily.ts';
import * as usageDaily from '../../projections/calls/usage-daily.ts';
import * as usageKeys from '../../projections/calls/usage-keys.ts';
import { keysReadModel as keys } from '../keys/index.ts';
import type { KeyUsageRow } from '../../projections/calls/usage-keys.ts';
import { callerOf, keyCallerOf } from '../http/state.ts';

export function listModels(deps: CallDeps) {
  return async (ctx: Context) => {
    const caller = keyCallerOf(ctx);
    const state = await deps.metering.state(caller.accountId);
    const data = deps.catalog
      .active()
      .filter((m) => isModelEnabled(state, m.id) && isModelAllowedForKey(state, caller.keyId, m.id))
      .map((m) => ({
        id: m.id,
        object: 'model',
        created: Math.floor(Date.parse(m.pricedAt) / 1000),
        owned_by: 'tollgate',
        status: m.status,
        multiplier: fromMilli(m.multiplierMilli),
        aliases: m.alias ? [m.alias] : [],
      }));
    ctx.body = { object: 'list', data };
  };
}

async function accountRow(deps: CallDeps, accountId: string): Promise<AccountRow> {
  await deps.ledger.readYourWrites();
  const row = await accounts.byId(deps.db, deps.ledger.rmSchema, accountId);
  // A valid key's account exists in the log: a missing row is a read model still behind.
  if (!row) throw new ReadModelsBehind(`account ${accountId} is not in the read models yet`);
  return row;
}

export function subscription(deps: CallDeps) {
  return async (ctx: Context) => {
    const a = await accountRow(deps, callerOf(ctx).accountId);
    const b: Balance = {
      quota: Number(a.quota_total),
      quotaUsed: Number(a.quota_used),
      extraGranted: Number(a.extra_granted),
      extraUsed: Number(a.extra_used),
      reserved: Number(a.reserved),
      startsAt: a.starts_at ? new Date(a.starts_at).toISOString() : null,
      expiresAt: a.expires_at ? new Date(a.expires_at).toISOString() : null,
    };
    const now = new Date();
    const state = await deps.metering.state(a.account_id);
    // The extra tokens as the account holds them: the pool and its lots of credit, whose expiry counts now.
    const held = balanceOf(state);
    Object.assign(b, { extraGranted: held.extraGranted, extraUsed: held.extraUsed, credits: held.credits });
    const active = balance.isPlanActive(b, now);
    const quotaRemaining = balance.mainRemaining(b);
    const extraRemaining = balance.extraRemaining(b, now);
    // The same rule as a new hold's: holds are taken from the combined pool.
    const usable = balance.availableTokens(b, now);
    const expiresAt = b.expiresAt ? new Date(b.expiresAt) : null;
    ctx.body = {
      object: 'subscription',
      account_id: a.account_id,
      plan: a.plan_id ? { id: a.plan_id, name: a.plan_name } : null,
      status: active ? 'active' : 'expired',
      quota: { total: a.quota_total, used: a.quota_used, reserved: a.reserved, remaining: quotaRemaining },
      extra_tokens: { granted: a.extra_granted, used: a.extra_used, remaining: extraRemaining, credits: creditsBody(state.credits, now) },
      remaining_tokens: usable,
      starts_at: a.starts_at ? new Date(a.starts_at).toISOString() : null,
      expires_at: expiresAt ? expiresAt.toISOString() : null,
      rate_limit: { requests_per_minute: a.requests_per_minute },
      models: a.models,
      // What was bought and when (receipts at GET /v1/payments/{id}), and whether the plan stops renewing.
      purchases: paymentsInOrder(state.payments.values()).map((lot) => paymentBody(a.account_id, lot)),
      cancellation: cancellationBody(state),
    };
  };
}

const DAY_MS = 86_400_000;

function parseRange(raw: unknown): number {
  if (raw === undefined) return 30;
  const m = typeof raw === 'string' ? /^(\d{1,3})d$/.exec(raw) : null;
  const days = m ? Number(m[1]) : NaN;
  if (!(days >= 1 && days <= 365)) throw badRequest("Invalid value for 'range': use 1d to 365d, e.g. 30d.", 'range');
  return days;
}

function parseBool(raw: unknown, name: string): boolean {
  if (raw === undefined) return false;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw badRequest(`Invalid value for '${name}': use true or false.`, name);
}

/** cached_tokens and cache_write_tokens are within prompt_tokens, reasoning_tokens within completion_tokens. */
interface Totals {
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
  images: number;
  billed_tokens: number;
  adjustment_tokens: number;
  corrected_billed_tokens: number;
}
const zero = (): Totals => ({
  requests: 0,
  prompt_tokens: 0,
  completion_tokens: 0,
  cached_tokens: 0,
  cache_write_tokens: 0,
  reasoning_tokens: 0,
  images: 0,
  billed_tokens: 0,
  adjustment_tokens: 0,
  corrected_billed_tokens: 0,
});
function add(t: Totals, r: UsageRow): void {
  t.requests += Number(r.requests);
  t.prompt_tokens += Number(r.prompt_tokens);
  t.completion_tokens += Number(r.completion_tokens);
  t.cached_tokens += Number(r.cached_tokens ?? 0);
  t.cache_write_tokens += Number(r.cache_write_tokens ?? 0);
  t.reasoning_tokens += Number(r.reasoning_tokens ?? 0);
  t.images += Number(r.images);
  t.billed_tokens += Number(r.billed);
  t.adjustment_tokens += Number(r.adjustment);
  t.corrected_billed_tokens = t.billed_tokens + t.adjustment_tokens;
}

/** Usage per key: what GET /v1/usage?group_by=key shows for each key. */
interface KeyTotals {
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  images: number;
  billed_tokens: number;
  adjustment_tokens: number;
  corrected_billed_tokens: number;
}
const zeroKey = (): KeyTotals => ({
  requests: 0,
  prompt_tokens: 0,
  completion_tokens: 0,
  images: 0,
  billed_tokens: 0,
  adjustment_tokens: 0,
  corrected_billed_tokens: 0,
});
function addKey(t: KeyTotals, r: KeyUsageRow): void {
  t.requests += Number(r.requests);
  t.prompt_tokens += Number(r.prompt_tokens);
  t.completion_tokens += Number(r.completion_tokens);
  t.images += Number(r.images);
  t.billed_tokens += Number(r.billed);
  t.adjustment_tokens += Number(r.adjustment);
  t.corrected_billed_tokens = t.billed_tokens + t.adjustment_tokens;
}

/** The documented CSV columns of GET /v1/usage?format=csv (one row per UTC day and model, or day and key). */
export const USAGE_CSV_COLUMNS = {
  model: [
    'date',
    'model',
    'requests',
    'prompt_tokens',
    'completion_tokens',
    'cached_tokens',
    'cache_write_tokens',
    'reasoning_tokens',
    'images',
    'billed_tokens',
    'adjustment_tokens',
    'corrected_billed_tokens',
  ],
  key: [
    'date',
    'key_id',
    'key_name',
    'requests',
    'prompt_tokens',
    'completion_tokens',
    'images',
    'billed_tokens',
    'adjustment_tokens',
    'corrected_billed_tokens',
  ],
} as const;

/** A CSV cell: quoted when it holds a separator, a quote or a line break; text that a spreadsheet would run as a formula is prefixed with '. */
function csvCell(v: unknown): string {
  let s = v === null || v === undefined ? '' : String(v);
  if (typeof v === 'string' && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

const csv = (columns: readonly string[], rows: Array<Record<string, unknown>>): string =>
  [columns.join(','), ...rows.map((r) => columns.map((c) => csvCell(r[c])).join(','))].join('\r\n') + '\r\n';

function oneOf<T extends string>(raw: unknown, name: string, values: readonly T[]): T | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !(values as readonly string[]).includes(raw))
    throw badRequest(`Invalid value for '${name}': use ${values.join(' or ')}.`, name);
  return raw as T;
}

export function usage(deps: CallDeps) {
  return async (ctx: Context) => {
    const q = ctx.query;
    for (const k of Object.keys(q)) if (!['daily', 'range', 'view', 'group_by', 'format'].includes(k)) throw badRequest(`Unknown query parameter '${k}'.`, k);
    const daily = parseBool(q.daily, 'daily');
    const days = parseRange(q.range);
    const view = q.view === undefined ? 'billed' : q.view;
    if (view !== 'billed' && view !== 'corrected') throw badRequest("Invalid value for 'view': use billed or corrected.", 'view');
    const groupBy = oneOf(q.group_by, 'group_by', ['model', 'key'] as const) ?? 'model';
    const format = oneOf(q.format, 'format', ['json', 'csv'] as const) ?? 'json';
    const today = new Date(new Date().toISOString().slice(0, 10) + 'T00:00:00Z');
    const first = new Date(today.getTime() - (days - 1) * DAY_MS).toISOString().slice(0, 10);
    const last = today.toISOString().slice(0, 10);
    const accountId = callerOf(ctx).accountId;
    await deps.ledger.readYourWrites();
    const rows = await usageDaily.between(deps.db, deps.ledger.rmSchema, accountId, first, last);
    const keyRows = groupBy === 'key' ? await usageKeys.between(deps.db, deps.ledger.rmSchema, accountId, first, last) : [];
    const keyList = groupBy === 'key' ? await keys.ofAccount(deps.db, deps.ledger.rmSchema, accountId) : [];
    const keyName = new Map(keyList.map((k) => [k.key_id, k.name]));
    // Keys in the order they were issued (a key id only the usage names, after them).
    const keyOrder = new Map(keyList.map((k, i) => [k.key_id, i]));
    const rank = (keyId: string) => keyOrder.get(keyId) ?? keyList.length;
    keyRows.sort((x, y) => (x.day < y.day ? -1 : x.day > y.day ? 1 : rank(x.key_id) - rank(y.key_id) || (x.key_id < y.key_id ? -1 : 1)));

    if (format === 'csv') {
      ctx.type = 'text/csv; charset=utf-8';
      ctx.set('content-disposition', `attachment; filename="usage-${accountId}-${first}-${last}${groupBy === 'key' ? '-by-key' : ''}.csv"`);
      ctx.body =
        groupBy === 'key'
          ? csv(
              USAGE_CSV_COLUMNS.key,
              keyRows.map((r) => {
                const t = zeroKey();
                addKey(t, r);
                return { date: r.day, key_id: r.key_id, key_name: keyName.get(r.key_id) ?? '', ...t };
              }),
            )
          : csv(
              USAGE_CSV_COLUMNS.model,
              rows.map((r) => {
                const t = zero();
                add(t, r);
                return { date: r.day, model: r.model, ...t };
              }),
            );
      return;
    }

    const totals = zero();
    const byModel = new Map<string, Totals>();
    const byDay = new Map<string, { totals: Totals; models: Map<string, Totals>; keys: Map<string, KeyTotals> }>();
    const dayOf = (day: string) => {
      if (!byDay.has(day)) byDay.set(day, { totals: zero(), models: new Map(), keys: new Map() });
      return byDay.get(day)!;
    };
    for (const r of rows) {
      add(totals, r);
      if (!byModel.has(r.model)) byModel.set(r.model, zero());
      add(byModel.get(r.model)!, r);
      const d = dayOf(r.day);
      add(d.totals, r);
      if (!d.models.has(r.model)) d.models.set(r.model, zero());
      add(d.models.get(r.model)!, r);
    }
    // Every key of the account (unused ones with zeros), then any key id only the usage names.
    const byKey = new Map<string, KeyTotals>(keyList.map((k) => [k.key_id, zeroKey()]));
    for (const r of keyRows) {
      if (!byKey.has(r.key_id)) byKey.set(r.key_id, zeroKey());
      addKey(byKey.get(r.key_id)!, r);
      const d = dayOf(r.day);
      if (!d.keys.has(r.key_id)) d.keys.set(r.key_id, zeroKey());
      addKey(d.keys.get(r.key_id)!, r);
    }
    const shown = (t: Totals) => ({
      ...t,
      tokens: t.prompt_tokens + t.completion_tokens,
      billed: view === 'corrected' ? t.corrected_billed_tokens : t.billed_tokens,
    });
    const shownKey = ([keyId, t]: [string, KeyTotals]) => ({
      key_id: keyId === '' ? null : keyId,
      name: keyName.get(keyId) ?? null,
      ...t,
      tokens: t.prompt_tokens + t.completion_tokens,
      billed: view === 'corrected' ? t.corrected_billed_tokens : t.billed_tokens,
    });
    const body: Record<string, unknown> = {
      object: 'usage',
      account_id: accountId,
      view,
      group_by: groupBy,
      range: { days, start: first, end: last },
      totals: shown(totals),
      models: [...byModel].map(([model, t]) => ({ model, ...shown(t) })),
    };
    if (groupBy === 'key') body.keys = [...byKey].map(shownKey);
    if (daily) {
      body.daily = Array.from({ length: days }, (_, i) => {
        const date = new Date(Date.parse(first + 'T00:00:00Z') + i * DAY_MS).toISOString().slice(0, 10);
        const d = byDay.get(date);
        return {
          date,
          ...shown(d?.totals ?? zero()),
          models: d ? [...d.models].map(([model, t]) => ({ model, ...shown(t) })) : [],
          ...(groupBy === 'key' ? { keys: d ? [...d.keys].map(shownKey) : [] } : {}),
        };
      });
    }
    ctx.body = body;
  };
}
