// An account's notification endpoints: each event's shape (src/ledger/event-shapes.ts gathers every feature's).
import { Type } from '@sinclair/typebox';
import { Event, Id, Reason, Instant } from '../event-atoms.ts';

export const WEBHOOK_EVENTS = {
  // Webhooks: an account's notification endpoints.
  WebhookRegistered: Event(
    {
      webhookId: Type.String({ pattern: '^wh_[a-f0-9]{16,32}$' }),
      accountId: Id,
      url: Type.String({ minLength: 8, maxLength: 2000 }),
      events: Type.Array(Type.String({ pattern: '^[a-z_]+\\.[a-z_]+$' }), { minItems: 1, maxItems: 50, uniqueItems: true }),
      thresholds: Type.Array(Type.Integer({ minimum: 1, maximum: 100 }), { minItems: 1, maxItems: 100, uniqueItems: true }),
      expiringDays: Type.Integer({ minimum: 1, maximum: 365 }),
      signingKeyId: Type.String({ pattern: '^[a-f0-9]{16}$' }),
      registeredAt: Instant,
    },
    "An endpoint that receives the account's notifications (src/webhooks). Its signing secret is derived from the server's master secret and the webhook id, shown once, and never stored; signingKeyId only fingerprints the master secret used.",
  ),
  WebhookRemoved: Event(
    { webhookId: Type.String({ pattern: '^wh_[a-f0-9]{16,32}$' }), accountId: Id, reason: Reason },
    'A webhook stops receiving notifications; deliveries still pending for it are cancelled.',
  ),
};
