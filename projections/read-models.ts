// The read models of the ledger. Each is a pure function of the event log.
import type { ProjectedEvent } from '../src/eventstore/port.ts';
import type { EventDataByType } from '../src/ledger/events.ts';
import { dayOf, defineProjection, type Row } from './row-projection.ts';

const data = <T extends keyof EventDataByType>(e: ProjectedEvent) => e.data as unknown as EventDataByType[T];

export interface KeyRow extends Row {
  key_id: string; account_id: string; name: string; hash: string; last4: string; status: 'active' | 'revoked';
  issued_at: string; revoked_at: string | null; revoke_reason: string | null; last_used_at: string | null;
}

export const keys = defineProjection<KeyRow>({
  name: 'keys', table: 'keys',
  columns: `key_id text NOT NULL, account_id text NOT NULL, name text NOT NULL, hash text NOT NULL UNIQUE,
    last4 text NOT NULL, status text NOT NULL, issued_at timestamptz NOT NULL, revoked_at timestamptz,
    revoke_reason text, last_used_at timestamptz`,
  indexes: ['account_id'],
  handles: new Set(['KeyIssued', 'KeyRevoked', 'ChatCharged', 'ImageCharged']),
  keysOf: (e) => [String(e.data.keyId)],
  evolve(row, e) {
    if (e.type === 'KeyIssued') {
      const d = data<'KeyIssued'>(e);
      return { key_id: d.keyId, account_id: d.accountId, name: d.name, hash: d.hash, last4: d.last4, status: 'active', issued_at: e.timestamp, revoked_at: null, revoke_reason: null, last_used_at: null };
    }
    if (!row) return null;
    if (e.type === 'KeyRevoked') return { ...row, status: 'revoked', revoked_at: e.timestamp, revoke_reason: data<'KeyRevoked'>(e).reason };
    return { ...row, last_used_at: e.timestamp };
  },
});

export interface AccountRow extends Row {
  account_id: string; name: string; plan_id: string | null; plan_name: string | null;
  quota_total: number; quota_used: number; reserved: number; open_holds: number;
  extra_granted: number; extra_used: number; requests_per_minute: number | null; models: string[];
  starts_at: string | null; expires_at: string | null; opened_at: string;
}

export const accounts = defineProjection<AccountRow>({
  name: 'accounts', table: 'accounts',
  columns: `account_id text NOT NULL, name text NOT NULL, plan_id text, plan_name text,
    quota_total bigint NOT NULL, quota_used bigint NOT NULL, reserved bigint NOT NULL, open_holds integer NOT NULL,
    extra_granted bigint NOT NULL, extra_used bigint NOT NULL, requests_per_minute integer, models jsonb NOT NULL,
    starts_at timestamptz, expires_at timestamptz, opened_at timestamptz NOT NULL`,
  handles: new Set(['AccountOpened', 'SubscriptionStarted', 'SubscriptionRenewed', 'ExtraTokensGranted', 'QuotaReserved', 'ChatCharged', 'ImageCharged', 'ReservationReleased', 'ChargeAdjusted']),
  keysOf: (e) => [String(e.data.accountId)],
  evolve(row, e) {
    if (e.type === 'AccountOpened') {
      const d = data<'AccountOpened'>(e);
      return { account_id: d.accountId, name: d.name, plan_id: null, plan_name: null, quota_total: 0, quota_used: 0, reserved: 0, open_holds: 0, extra_granted: 0, extra_used: 0, requests_per_minute: null, models: [], starts_at: null, expires_at: null, opened_at: e.timestamp };
    }
    if (!row) return null;
    switch (e.type) {
      case 'SubscriptionStarted':
      case 'SubscriptionRenewed': {
        const d = data<'SubscriptionStarted'>(e);
        return { ...row, plan_id: d.planId, plan_name: d.planName, quota_total: d.quota, quota_used: 0, requests_per_minute: d.requestsPerMinute, models: d.models, starts_at: d.startsAt, expires_at: d.expiresAt };
      }
      case 'ExtraTokensGranted':
        return { ...row, extra_granted: row.extra_granted + data<'ExtraTokensGranted'>(e).amount };
      case 'QuotaReserved':
        return { ...row, reserved: row.reserved + data<'QuotaReserved'>(e).amount, open_holds: row.open_holds + 1 };
      case 'ReservationReleased':
        return { ...row, reserved: row.reserved - data<'ReservationReleased'>(e).amount, open_holds: row.open_holds - 1 };
      case 'ChatCharged':
      case 'ImageCharged': {
        const d = data<'ChatCharged'>(e);
        return { ...row, reserved: row.reserved - d.reserved, open_holds: row.open_holds - 1, quota_used: row.quota_used + d.fromQuota, extra_used: row.extra_used + d.fromExtra };
      }
      case 'ChargeAdjusted': {
        const d = data<'ChargeAdjusted'>(e);
        return { ...row, quota_used: row.quota_used + d.quotaDelta, extra_used: row.extra_used + d.extraDelta };
      }
      default:
        return row;
    }
  },
});

export interface HoldRow extends Row {
  hold_id: string; account_id: string; request_id: string; model: string; kind: string; amount: number;
  reserved_at: string; expires_at: string;
}

export const holds = defineProjection<HoldRow>({
  name: 'holds', table: 'holds',
  columns: `hold_id text NOT NULL, account_id text NOT NULL, request_id text NOT NULL, model text NOT NULL,
    kind text NOT NULL, amount bigint NOT NULL, reserved_at timestamptz NOT NULL, expires_at timestamptz NOT NULL`,
  indexes: ['expires_at'],
  handles: new Set(['QuotaReserved', 'ChatCharged', 'ImageCharged', 'ReservationReleased']),
  keysOf: (e) => [String(e.data.holdId)],
  evolve(_row, e) {
    if (e.type !== 'QuotaReserved') return null;
    const d = data<'QuotaReserved'>(e);
    return { hold_id: d.holdId, account_id: d.accountId, request_id: d.requestId, model: d.model, kind: d.kind, amount: d.amount, reserved_at: e.timestamp, expires_at: d.expiresAt };
  },
});

export interface UsageRow extends Row {
  account_id: string; day: string; model: string; requests: number; prompt_tokens: number;
  completion_tokens: number; images: number; billed: number; adjustment: number;
}

export const usageDaily = defineProjection<UsageRow>({
  name: 'usage_daily', table: 'usage_daily',
  columns: `account_id text NOT NULL, day text NOT NULL, model text NOT NULL, requests bigint NOT NULL,
    prompt_tokens bigint NOT NULL, completion_tokens bigint NOT NULL, images bigint NOT NULL,
    billed bigint NOT NULL, adjustment bigint NOT NULL`,
  indexes: ['account_id, day'],
  handles: new Set(['ChatCharged', 'ImageCharged', 'ChargeAdjusted']),
  keysOf(e) {
    const d = e.data as { accountId: string; model: string; chargedAt?: string };
    // An adjustment belongs to the day of the charge it corrects.
    const day = dayOf(e.type === 'ChargeAdjusted' ? String(d.chargedAt) : e.timestamp);
    return [`${d.accountId}|${day}|${d.model}`];
  },
  evolve(row, e, key) {
    const r = row ?? newUsageRow(key);
    if (e.type === 'ChargeAdjusted') return { ...r, adjustment: r.adjustment + data<'ChargeAdjusted'>(e).delta };
    if (e.type === 'ChatCharged') {
      const d = data<'ChatCharged'>(e);
      return { ...r, requests: r.requests + 1, prompt_tokens: r.prompt_tokens + d.promptTokens, completion_tokens: r.completion_tokens + d.completionTokens, billed: r.billed + d.billed };
    }
    const d = data<'ImageCharged'>(e);
    return { ...r, requests: r.requests + 1, images: r.images + d.images, billed: r.billed + d.billed };
  },
});

// Account ids and days cannot hold '|'; model ids may, so the model is everything after the second.
function newUsageRow(key: string): UsageRow {
  const a = key.indexOf('|');
  const b = key.indexOf('|', a + 1);
  return { account_id: key.slice(0, a), day: key.slice(a + 1, b), model: key.slice(b + 1), requests: 0, prompt_tokens: 0, completion_tokens: 0, images: 0, billed: 0, adjustment: 0 };
}

export interface ModelRow extends Row {
  model_id: string; alias: string | null; multiplier_milli: number; status: string; updated_at: string;
}

export const models = defineProjection<ModelRow>({
  name: 'models', table: 'models',
  columns: `model_id text NOT NULL, alias text, multiplier_milli integer NOT NULL, status text NOT NULL, updated_at timestamptz NOT NULL`,
  handles: new Set(['ModelPriced']),
  keysOf: (e) => [String(e.data.modelId)],
  evolve(_row, e) {
    const d = data<'ModelPriced'>(e);
    return { model_id: d.modelId, alias: d.alias, multiplier_milli: d.multiplierMilli, status: d.status, updated_at: e.timestamp };
  },
});

export interface PlanRow extends Row {
  plan_id: string; name: string; quota: number; validity_days: number; requests_per_minute: number; models: string[]; updated_at: string;
}

export const plans = defineProjection<PlanRow>({
  name: 'plans', table: 'plans',
  columns: `plan_id text NOT NULL, name text NOT NULL, quota bigint NOT NULL, validity_days integer NOT NULL,
    requests_per_minute integer NOT NULL, models jsonb NOT NULL, updated_at timestamptz NOT NULL`,
  handles: new Set(['PlanDefined', 'PlanUpdated']),
  keysOf: (e) => [String(e.data.planId)],
  evolve(_row, e) {
    const d = data<'PlanDefined'>(e);
    return { plan_id: d.planId, name: d.name, quota: d.quota, validity_days: d.validityDays, requests_per_minute: d.requestsPerMinute, models: d.models, updated_at: e.timestamp };
  },
});

export interface ChargeRow extends Row {
  event_id: string; position: number; account_id: string; key_id: string | null; request_id: string; model: string;
  kind: 'chat' | 'image' | 'adjustment'; at: string; day: string; prompt_tokens: number; completion_tokens: number;
  images: number; tokens_per_image: number; multiplier_milli: number; billed: number; from_quota: number; from_extra: number;
  correction_id: string | null; charge_event_id: string | null;
}

/** The per-request log behind statements: one row per charge and per adjustment. */
export const charges = defineProjection<ChargeRow>({
  name: 'charges', table: 'charges',
  columns: `event_id text NOT NULL, position bigint NOT NULL, account_id text NOT NULL, key_id text, request_id text NOT NULL,
    model text NOT NULL, kind text NOT NULL, at timestamptz NOT NULL, day text NOT NULL, prompt_tokens bigint NOT NULL,
    completion_tokens bigint NOT NULL, images bigint NOT NULL, tokens_per_image bigint NOT NULL, multiplier_milli integer NOT NULL, billed bigint NOT NULL,
    from_quota bigint NOT NULL, from_extra bigint NOT NULL, correction_id text, charge_event_id text`,
  indexes: ['account_id, at', 'model, at'],
  handles: new Set(['ChatCharged', 'ImageCharged', 'ChargeAdjusted']),
  keysOf: (e) => [e.id],
  keyedByEvent: true,
  evolve(_row, e) {
    if (e.type === 'ChargeAdjusted') {
      const d = data<'ChargeAdjusted'>(e);
      return { event_id: e.id, position: e.position, at: e.timestamp, day: dayOf(e.timestamp), account_id: d.accountId, key_id: null, request_id: d.requestId, model: d.model, kind: 'adjustment', prompt_tokens: 0, completion_tokens: 0, images: 0, tokens_per_image: 0, multiplier_milli: d.multiplierMilliCorrected, billed: d.delta, from_quota: d.quotaDelta, from_extra: d.extraDelta, correction_id: d.correctionId, charge_event_id: d.chargeEventId };
    }
    const d = data<'ChatCharged'>(e) as Partial<EventDataByType['ChatCharged'] & EventDataByType['ImageCharged']> & EventDataByType['ChatCharged'];
    // Fields written out, not spread: a spread-built literal takes V8's slow path, and this runs
    // once per charge on every rebuild.
    return {
      event_id: e.id, position: e.position, at: e.timestamp, day: dayOf(e.timestamp), account_id: d.accountId, key_id: d.keyId, request_id: d.requestId, model: d.model, kind: e.type === 'ChatCharged' ? 'chat' : 'image',
      prompt_tokens: d.promptTokens ?? 0, completion_tokens: d.completionTokens ?? 0, images: d.images ?? 0, tokens_per_image: d.tokensPerImage ?? 0,
      multiplier_milli: d.multiplierMilli, billed: d.billed, from_quota: d.fromQuota, from_extra: d.fromExtra, correction_id: null, charge_event_id: null,
    };
  },
});

export const ALL_PROJECTIONS = [keys, accounts, holds, usageDaily, models, plans, charges];
