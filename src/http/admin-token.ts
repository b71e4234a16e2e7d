// The admin token: TOLLGATE_ADMIN_TOKEN, else a file in the data directory (mode 0600),
// generated on first start and printed once.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

export const ADMIN_TOKEN_PREFIX = 'tg_admin_';
/** A token shorter than this is refused at start: it could be guessed. */
export const MIN_ADMIN_TOKEN_LENGTH = 32;
/** Wrong admin tokens one source may send a minute (TOLLGATE_ADMIN_AUTH_FAILURES_PER_MINUTE). */
export const ADMIN_GUESSES_PER_MINUTE = 20;
/** Wrong admin tokens from all sources together a minute: this many times the per-source limit. */
export const ADMIN_GUESSES_IN_ALL_FACTOR = 10;

/** Throws, naming the variable, when an operator-set token is too short. */
export function assertStrongAdminToken(token: string): void {
  if (token.length < MIN_ADMIN_TOKEN_LENGTH)
    throw new Error(
      `TOLLGATE_ADMIN_TOKEN is ${token.length} characters: it must be at least ${MIN_ADMIN_TOKEN_LENGTH} (e.g. openssl rand -base64 32), or unset it to have one generated.`,
    );
}

export function loadOrCreateAdminToken(dataDir: string): { token: string; created: boolean; path: string } {
  const path = join(dataDir, 'admin-token');
  if (existsSync(path)) return { token: readFileSync(path, 'utf8').trim(), created: false, path };
  const token = ADMIN_TOKEN_PREFIX + randomBytes(32).toString('base64url');
  // On PostgreSQL nothing else creates the data directory: the token may be its only file.
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  writeFileSync(path, token + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(path, 0o600);
  return { token, created: true, path };
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Constant-time: compares fixed-length digests, whatever the presented length. */
export function adminTokenMatches(presented: string, expected: string): boolean {
  return expected.length > 0 && timingSafeEqual(digest(presented), digest(expected));
}
