// API keys, their controls and management keys: each event's shape (src/ledger/event-shapes.ts gathers every feature's).
import { Type } from '@sinclair/typebox';
import { Event, Id, Name100, Text200, Reason, Instant, Sha256 } from '../event-atoms.ts';

export const KEY_EVENTS = {
  // Keys: API keys on their own streams, their controls on the account stream, management keys.
  KeyIssued: Event(
    { keyId: Id, accountId: Id, name: Text200, hash: Sha256, last4: Type.String({ pattern: '^[A-Za-z0-9]{4}$' }) },
    'An API key is issued. Only its SHA-256 hash and last 4 characters are kept, never the secret.',
  ),
  KeyRevoked: Event({ keyId: Id, accountId: Id, reason: Reason }, 'An API key is revoked; requests with it fail with 401.'),
  KeyControlsSet: Event(
    {
      accountId: Id,
      keyId: Id,
      name: Text200,
      spendLimit: Type.Union([
        Type.Null(),
        Type.Object(
          {
            tokens: Type.Integer({ minimum: 0, maximum: 1000000000000000 }),
            period: Type.Union([Type.Literal('none'), Type.Literal('daily'), Type.Literal('weekly'), Type.Literal('monthly')]),
          },
          { additionalProperties: false },
        ),
      ]),
      models: Type.Union([Type.Null(), Type.Array(Name100, { minItems: 1, maxItems: 500, uniqueItems: true })]),
      expiresAt: Type.Union([Type.Null(), Instant]),
      changed: Type.Array(Type.Union([Type.Literal('name'), Type.Literal('spend_limit'), Type.Literal('models'), Type.Literal('expires_at')]), {
        uniqueItems: true,
        maxItems: 4,
      }),
      rotatedFrom: Type.Optional(Id),
    },
    "A key's controls from now on, on its account's stream (the account decider checks them with every hold): a spend limit in billed tokens per UTC period, the models the key may call (within the plan's), an expiry, a name. Each control is null when not set. `changed` names the fields this act changed (the actor is in the metadata); `rotatedFrom` (a rotation) makes the key count its spend together with that key's.",
  ),
  KeyRotated: Event(
    { keyId: Id, accountId: Id, replacedBy: Id, revokeAt: Instant },
    "A key is replaced by a new one (replacedBy, issued with the same controls). It keeps working until revokeAt, when authentication refuses it; a KeyRevoked with reason 'rotated' follows (the sweeper, or the first process that refuses it).",
  ),
  ManagementKeyIssued: Event(
    { accountId: Id, keyId: Id, name: Text200, hash: Sha256, last4: Type.String({ pattern: '^[A-Za-z0-9]{4}$' }), issuedAt: Instant },
    "A management key is issued for an account: it creates, lists, updates and revokes the account's API keys over HTTP and can call no model. Only its SHA-256 hash and last 4 characters are kept.",
  ),
  ManagementKeyRevoked: Event({ accountId: Id, keyId: Id }, 'A management key is revoked: it stops working at once, on every gateway.'),
};
