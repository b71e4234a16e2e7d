// GET /v1/models, /v1/subscription and /v1/usage: answered from the read models.
import type { Context } from 'koa';
import type { GatewayDeps } from '../gateway/deps.ts';
import { badRequest } from '../http/errors.ts';
import { isModelEnabled } from '../ledger/account.ts';
import { fromMilli } from '../ledger/pricing.ts';
import type { AccountRow, UsageRow } from '../../projections/read-models.ts';

export function listModels(deps: GatewayDeps) {
  return async (ctx: Context) => {
    const state = await deps.metering.state(ctx.state.auth.accountId);
    const data = deps.catalog.active().filter((m) => isModelEnabled(state, m.id)).map((m) => ({
      id: m.id, object: 'model', created: Math.floor(Date.parse(m.pricedAt) / 1000), owned_by: 'tollgate',
      status: m.status, multiplier: fromMilli(m.multiplierMilli), aliases: m.alias ? [m.alias] : [],
    }));
    ctx.body = { object: 'list', data };
  };
}

async function accountRow(deps: GatewayDeps, accountId: string): Promise<AccountRow> {
  await deps.readYourWrites();
  const rows = await deps.db.query<AccountRow>(`SELECT * FROM "${deps.ledger.rmSchema}".accounts WHERE account_id = $1`, [accountId]);
  if (!rows[0]) throw badRequest('account not found');
  return rows[0];
}

export function subscription(deps: GatewayDeps) {
  return async (ctx: Context) => {
    const a = await accountRow(deps, ctx.state.auth.accountId);
    const expiresAt = a.expires_at ? new Date(a.expires_at) : null;
    const active = !!expiresAt && expiresAt.getTime() > Date.now();
    const quotaRemaining = Math.max(0, a.quota_total - a.quota_used);
    const extraRemaining = Math.max(0, a.extra_granted - a.extra_used);
    // Holds are taken from the combined pool; show them against the main quota first.
    const usable = Math.max(0, (active ? quotaRemaining : 0) + extraRemaining - a.reserved);
    ctx.body = {
      object: 'subscription',
      account_id: a.account_id,
      plan: a.plan_id ? { id: a.plan_id, name: a.plan_name } : null,
      status: active ? 'active' : 'expired',
      quota: { total: a.quota_total, used: a.quota_used, reserved: a.reserved, remaining: quotaRemaining },
      extra_tokens: { granted: a.extra_granted, used: a.extra_used, remaining: extraRemaining },
      remaining_tokens: usable,
      starts_at: a.starts_at ? new Date(a.starts_at).toISOString() : null,
      expires_at: expiresAt ? expiresAt.toISOString() : null,
      rate_limit: { requests_per_minute: a.requests_per_minute },
      models: a.models,
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

interface Totals { requests: number; prompt_tokens: number; completion_tokens: number; images: number; billed_tokens: number; adjustment_tokens: number; corrected_billed_tokens: number }
const zero = (): Totals => ({ requests: 0, prompt_tokens: 0, completion_tokens: 0, images: 0, billed_tokens: 0, adjustment_tokens: 0, corrected_billed_tokens: 0 });
function add(t: Totals, r: UsageRow): void {
  t.requests += Number(r.requests); t.prompt_tokens += Number(r.prompt_tokens); t.completion_tokens += Number(r.completion_tokens);
  t.images += Number(r.images); t.billed_tokens += Number(r.billed); t.adjustment_tokens += Number(r.adjustment);
  t.corrected_billed_tokens = t.billed_tokens + t.adjustment_tokens;
}

export function usage(deps: GatewayDeps) {
  return async (ctx: Context) => {
    const q = ctx.query;
    for (const k of Object.keys(q)) if (!['daily', 'range', 'view'].includes(k)) throw badRequest(`Unknown query parameter '${k}'.`, k);
    const daily = parseBool(q.daily, 'daily');
    const days = parseRange(q.range);
    const view = q.view === undefined ? 'billed' : q.view;
    if (view !== 'billed' && view !== 'corrected') throw badRequest("Invalid value for 'view': use billed or corrected.", 'view');
    const today = new Date(new Date().toISOString().slice(0, 10) + 'T00:00:00Z');
    const first = new Date(today.getTime() - (days - 1) * DAY_MS).toISOString().slice(0, 10);
    const last = today.toISOString().slice(0, 10);
    await deps.readYourWrites();
    const rows = await deps.db.query<UsageRow>(
      `SELECT * FROM "${deps.ledger.rmSchema}".usage_daily WHERE account_id = $1 AND day >= $2 AND day <= $3 ORDER BY day, model`,
      [ctx.state.auth.accountId, first, last]);
    const totals = zero();
    const byModel = new Map<string, Totals>();
    const byDay = new Map<string, { totals: Totals; models: Map<string, Totals> }>();
    for (const r of rows) {
      add(totals, r);
      if (!byModel.has(r.model)) byModel.set(r.model, zero());
      add(byModel.get(r.model)!, r);
      if (!byDay.has(r.day)) byDay.set(r.day, { totals: zero(), models: new Map() });
      const d = byDay.get(r.day)!;
      add(d.totals, r);
      if (!d.models.has(r.model)) d.models.set(r.model, zero());
      add(d.models.get(r.model)!, r);
    }
    const shown = (t: Totals) => ({ ...t, tokens: t.prompt_tokens + t.completion_tokens, billed: view === 'corrected' ? t.corrected_billed_tokens : t.billed_tokens });
    const body: Record<string, unknown> = {
      object: 'usage', account_id: ctx.state.auth.accountId, view,
      range: { days, start: first, end: last },
      totals: shown(totals),
      models: [...byModel].map(([model, t]) => ({ model, ...shown(t) })),
    };
    if (daily) {
      body.daily = Array.from({ length: days }, (_, i) => {
        const date = new Date(Date.parse(first + 'T00:00:00Z') + i * DAY_MS).toISOString().slice(0, 10);
        const d = byDay.get(date);
        return { date, ...shown(d?.totals ?? zero()), models: d ? [...d.models].map(([model, t]) => ({ model, ...shown(t) })) : [] };
      });
    }
    ctx.body = body;
  };
}
