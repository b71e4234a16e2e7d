// Deterministic event ids: the same fact always gets the same id, so an append retried after its
// outcome was lost is refused as a duplicate (or found in the log) instead of written twice.
import { createHash } from 'node:crypto';

export function uuidFrom(text: string): string {
  const h = createHash('sha256').update(text).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The id of the i-th event that closes a hold by charging it ('charge') or releasing it ('release'). */
export const holdEventId = (holdId: string, closing: 'charge' | 'release', i = 0): string => uuidFrom(`${closing}|${holdId}|${i}`);
