// An account's webhook registrations as a pure decider over the stream webhooks-<account>:
// WebhookRegistered and WebhookRemoved, each with the operator as its actor. The input rules of a
// registration (events, thresholds, expiry warning) are here too; the URL's are in endpoint.ts.
import type { Decider } from '../ledger/decider.ts';
import type { DomainEvent, EventDataByType, StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid } from '../ledger/errors.ts';
import { NOTIFICATION_TYPES, type NotificationType } from './kinds.ts';

export type Registration = EventDataByType['WebhookRegistered'];

export const DEFAULT_THRESHOLDS: readonly number[] = [80, 90, 100];
export const DEFAULT_EXPIRING_DAYS = 7;
export const MAX_EXPIRING_DAYS = 365;
/** Endpoints one account may have at a time. */
export const MAX_WEBHOOKS_PER_ACCOUNT = 20;

export interface WebhooksState {
  /** Active registrations by webhook id. */
  active: Record<string, Registration>;
}

export type WebhookCommand = { type: 'Register'; registration: Registration } | { type: 'Remove'; accountId: string; webhookId: string; reason: string };

export const webhookDecider: Decider<WebhooksState, WebhookCommand, StreamEvents['webhooks']> = {
  initialState: () => ({ active: {} }),
  decide(c, s) {
    if (c.type === 'Register') {
      const r = c.registration;
      if (s.active[r.webhookId]) throw new DomainError('already_exists', `webhook ${r.webhookId} exists`);
      if (Object.keys(s.active).length >= MAX_WEBHOOKS_PER_ACCOUNT) {
        throw new DomainError('conflict', `account ${r.accountId} already has ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks; remove one first`);
      }
      return [{ type: 'WebhookRegistered', data: r }];
    }
    if (!s.active[c.webhookId]) throw new DomainError('not_found', `webhook ${c.webhookId} not found for account ${c.accountId}`, { param: 'webhook_id' });
    return [{ type: 'WebhookRemoved', data: { webhookId: c.webhookId, accountId: c.accountId, reason: c.reason } }];
  },
  evolve(s, e: DomainEvent) {
    if (e.type === 'WebhookRegistered') return { active: { ...s.active, [e.data.webhookId]: e.data } };
    if (e.type === 'WebhookRemoved') {
      const { [e.data.webhookId]: _removed, ...rest } = s.active;
      return { active: rest };
    }
    return s;
  },
};

export interface RegistrationInput {
  url: unknown;
  events: NotificationType[];
  thresholds: number[];
  expiringDays: number;
}

const FIELDS = new Set(['url', 'events', 'thresholds', 'expiring_days']);

/** The request body's fields other than the URL, checked; defaults filled in. Throws DomainError('invalid'). */
export function registrationInput(body: Record<string, unknown>): RegistrationInput {
  const unknownField = Object.keys(body).find((k) => !FIELDS.has(k));
  if (unknownField !== undefined)
    throw invalid(`Unknown field '${unknownField.slice(0, 50)}'; a webhook takes url, events, thresholds and expiring_days.`, {
      param: unknownField.slice(0, 50),
    });
  return { url: body.url, events: eventsOf(body.events), thresholds: thresholdsOf(body.thresholds), expiringDays: expiringDaysOf(body.expiring_days) };
}

function eventsOf(v: unknown): NotificationType[] {
  if (v === undefined) return [...NOTIFICATION_TYPES];
  const known = NOTIFICATION_TYPES as readonly string[];
  if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === 'string')) {
    throw invalid(`'events' must be a non-empty list of: ${known.join(', ')}.`, { param: 'events' });
  }
  const unknownType = v.find((x) => !known.includes(x));
  if (unknownType !== undefined) throw invalid(`Unknown event '${String(unknownType).slice(0, 50)}'; known: ${known.join(', ')}.`, { param: 'events' });
  return known.filter((t) => v.includes(t)) as NotificationType[];
}

function thresholdsOf(v: unknown): number[] {
  if (v === undefined) return [...DEFAULT_THRESHOLDS];
  if (!Array.isArray(v) || v.length === 0 || v.length > 100 || !v.every((x) => typeof x === 'number' && Number.isInteger(x) && x >= 1 && x <= 100)) {
    throw invalid(`'thresholds' must be a non-empty list of whole percentages from 1 to 100.`, { param: 'thresholds' });
  }
  return [...new Set(v as number[])].sort((a, b) => a - b);
}

function expiringDaysOf(v: unknown): number {
  if (v === undefined) return DEFAULT_EXPIRING_DAYS;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > MAX_EXPIRING_DAYS) {
    throw invalid(`'expiring_days' must be a whole number of days from 1 to ${MAX_EXPIRING_DAYS}.`, { param: 'expiring_days' });
  }
  return v;
}
