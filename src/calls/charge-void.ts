// A charge that committed while its call failed (the database's connection died after the
// append reached the server; the caller got a 503) is voided: a compensating ChargeAdjusted to
// zero, with its own deterministic id. History keeps both events; statements, usage and the
// read models net them like any adjustment, and the money rule is balance.ts's, as for corrections.
import { uuidFrom } from '../ledger/event-ids.ts';

const PREFIX = 'reply_lost:';

/** The correction id a void carries: names the hold, so it is the same whoever appends it. */
export const voidCorrectionId = (holdId: string): string => `${PREFIX}${holdId}`;

export const isVoidCorrection = (correctionId: string): boolean => correctionId.startsWith(PREFIX);

/** The void's event id: a second attempt (another gateway, after a restart) is refused as a duplicate. */
export const voidEventId = (holdId: string): string => uuidFrom(`void|${holdId}`);

/**
 * A void is final: it ranks above every correction (their rank is a model stream revision), so
 * no later correction re-prices a voided charge back into a bill.
 */
export const VOID_RANK = Number.MAX_SAFE_INTEGER;
