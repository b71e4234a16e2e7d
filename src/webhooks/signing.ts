// Webhook signing secrets. Nothing secret is stored with a webhook: its secret is derived, when
// needed, from the server's master secret and the webhook id (HMAC-SHA256), shown once when the
// webhook is registered, and used again only to sign deliveries. The master secret comes from
// TOLLGATE_WEBHOOK_SECRET or from <data dir>/webhook-secret (created with mode 0600 on first use,
// like the admin token). Every gateway that may send must use the same master secret; the
// registration records a fingerprint of it (signingKeyId) so a gateway with another one refuses
// to sign instead of sending signatures nobody can verify.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
/** The shortest master secret accepted from TOLLGATE_WEBHOOK_SECRET. */
export const MIN_MASTER_SECRET_LENGTH = 32;

/** The master secret, kept in a closure: the object can be logged or inspected without showing it. */
export interface MasterKey {
  /** Fingerprint of the master secret (16 hex digits); tells two master secrets apart, reveals nothing usable. */
  readonly keyId: string;
  /** The webhook's signing secret, `whsec_…`. */
  secretFor(webhookId: string): string;
}

export function masterKey(master: string): MasterKey {
  if (master.length < MIN_MASTER_SECRET_LENGTH) {
    throw new Error(`TOLLGATE_WEBHOOK_SECRET must be at least ${MIN_MASTER_SECRET_LENGTH} characters (e.g. openssl rand -base64 48)`);
  }
  const mac = (label: string) => createHmac('sha256', master).update(label, 'utf8').digest();
  const keyId = mac('tollgate-webhook-key-id').toString('hex').slice(0, 16);
  return {
    keyId,
    secretFor: (webhookId) => WEBHOOK_SECRET_PREFIX + mac(`tollgate-webhook-secret\u0000${webhookId}`).toString('base64url'),
  };
}

/** <data dir>/webhook-secret: read, or created (mode 0600) with 48 random bytes on first use. */
export function loadOrCreateMasterSecret(dataDir: string): { secret: string; created: boolean; path: string } {
  const path = join(dataDir, 'webhook-secret');
  if (existsSync(path)) return { secret: readFileSync(path, 'utf8').trim(), created: false, path };
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const secret = randomBytes(48).toString('base64url');
  writeFileSync(path, secret + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(path, 0o600);
  return { secret, created: true, path };
}

/** `Tollgate-Signature`: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the webhook's secret>. */
export function signatureHeader(secret: string, body: string, unixSeconds: number): string {
  const t = Math.floor(unixSeconds);
  return `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${body}`, 'utf8').digest('hex')}`;
}

/** What a receiver does (docs/operating.md, "Webhooks"): the signature matches and its time is within `toleranceSeconds`. */
export function verifySignature(secret: string, header: string, body: string, nowSeconds: number, toleranceSeconds = 300): boolean {
  const parts = new Map(header.split(',').map((p) => p.trim().split('=', 2) as [string, string]));
  const t = Number(parts.get('t'));
  const v1 = parts.get('v1') ?? '';
  if (!Number.isSafeInteger(t) || Math.abs(nowSeconds - t) > toleranceSeconds) return false;
  const expected = signatureHeader(secret, body, t).split('v1=')[1];
  return v1.length === expected.length && timingSafeEqual(Buffer.from(v1), Buffer.from(expected));
}
