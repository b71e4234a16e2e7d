// The account's lots of credit through its events: a grant opens a lot, a charge or an adjustment
// moves tokens by its recorded split (credits.ts decides it), a refund withdraws a pack's unused
// tokens (payment-rules.ts), and an expiry closes a lot. The account decider delegates here.
import type { EventDataByType, StreamEvents } from '../ledger/events.ts';
import { definedOnly } from '../ledger/events.ts';
import { InvariantViolation, requireTokenAmount } from '../ledger/errors.ts';
import { balanceOf, requireOpen, type AccountState } from './account-state.ts';
import { creditViews } from './balance.ts';
import { applyDraws, drawCredits, dueToExpire, grantedLot, isTermed, POOL, type CreditDraw, type CreditTerms } from './credits.ts';

export type CreditCommand =
  | { type: 'GrantExtra'; accountId: string; amount: number; reason: string; terms?: Partial<CreditTerms> }
  /** Closes the lots past their expiry (the sweeper, src/calls/sweeper.ts). */
  | { type: 'ExpireCredits'; now: Date };

export function decideCredits(c: CreditCommand, s: AccountState): StreamEvents['account'][] {
  requireOpen(s);
  switch (c.type) {
    case 'GrantExtra':
      requireTokenAmount(c.amount, 'amount');
      return [
        {
          type: 'ExtraTokensGranted',
          data: {
            accountId: s.accountId,
            amount: c.amount,
            reason: c.reason,
            ...definedOnly({ expiresAt: c.terms?.expiresAt ?? undefined, priority: c.terms?.priority, models: c.terms?.models ?? undefined }),
          },
        },
      ];
    case 'ExpireCredits': {
      // A lot waits for the holds let in before its expiry: their charges may still draw on it.
      const heldSince = (expiresAt: string) => s.holds.some((h) => h.at === undefined || h.at < expiresAt);
      const expiryOf = (lot: number) => s.credits.find((l) => l.lot === lot)!.expiresAt!;
      return dueToExpire(s.credits, c.now)
        .filter((d) => !heldSince(expiryOf(d.lot)))
        .map((d) => ({ type: 'CreditsExpired', data: { accountId: s.accountId, lot: d.lot, tokens: d.tokens, expiresAt: expiryOf(d.lot) } }));
    }
  }
}

export function evolveGranted(s: AccountState, d: EventDataByType['ExtraTokensGranted']): AccountState {
  const lot = s.extraLots;
  if (!isTermed(d)) return { ...s, extraGranted: s.extraGranted + d.amount, extraLots: lot + 1 };
  return { ...s, credits: [...s.credits, grantedLot(lot, d.amount, d)], extraLots: lot + 1 };
}

/** Tokens given back that no lot could take: a new grant to the pool. */
export const evolveCredited = (s: AccountState, tokens: number): AccountState =>
  tokens > 0 ? { ...s, extraGranted: s.extraGranted + tokens, extraLots: s.extraLots + 1 } : s;

export function evolveExpired(s: AccountState, d: EventDataByType['CreditsExpired']): AccountState {
  const i = s.credits.findIndex((l) => l.lot === d.lot);
  const l = s.credits[i];
  if (!l || l.closed || l.tokens - l.used !== d.tokens) throw new InvariantViolation(`credit lot ${d.lot} cannot expire ${d.tokens} tokens`);
  const credits = s.credits.slice();
  credits[i] = { ...l, tokens: l.used, expired: d.tokens, closed: true };
  return { ...s, credits };
}

/**
 * The extra tokens after `extra` more used (negative: given back): the termed lots by the split
 * the event recorded, the rest by the pool (which may go past its grants, as an overrun
 * correction takes it). Events without a split are the pool's alone.
 */
export function withExtraMoved(s: AccountState, extra: number, recorded: readonly CreditDraw[] | undefined): Pick<AccountState, 'credits' | 'extraUsed'> {
  if (extra === 0) return { credits: s.credits, extraUsed: s.extraUsed };
  const termed = (recorded ?? []).reduce((sum, d) => sum + d.tokens, 0);
  return { credits: applyDraws(s.credits, recorded ?? []), extraUsed: s.extraUsed + extra - termed };
}

/** The termed lots' part of `extra` tokens more used (negative: given back) for `model`; the rest is the pool's. */
export function termedSplit(s: AccountState, extra: number, model: string): CreditDraw[] {
  if (extra === 0 || s.credits.length === 0) return [];
  return drawCredits(creditViews(balanceOf(s)), extra, model, null).draws.filter((d) => d.lot !== POOL);
}

/** Tokens a return can give back to the extra tokens: what the pool and the open lots used. */
export const returnable = (s: AccountState): number => s.extraUsed + s.credits.reduce((sum, l) => sum + (l.closed ? 0 : l.used), 0);
