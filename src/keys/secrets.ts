// API key secrets: `sk_svc_` + 43 base62-ish characters of randomness. Only the SHA-256 hash and
// the last 4 characters are ever stored; a 256-bit random secret needs no slow hash.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export const KEY_PREFIX = 'sk_svc_';
const KEY_PATTERN = /^sk_svc_[A-Za-z0-9]{20,128}$/;

export function generateKeySecret(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url').replace(/[-_]/g, 'x');
}

export const isWellFormedKey = (secret: string): boolean => KEY_PATTERN.test(secret);

export function hashKey(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

export const lastFour = (secret: string): string => secret.slice(-4);

export const maskKey = (last4: string): string => `${KEY_PREFIX}…${last4}`;

/** Constant-time comparison of two hex hashes. */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}
