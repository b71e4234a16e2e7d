// Sign-in links and sessions, each on a stream of its own. A link is issued once and used at most
// once, before it expires, by the address it was sent to; a session starts once and ends once.
// Only SHA-256 hashes of their secrets are kept (a 256-bit random secret needs no slow hash).
import type { Decider } from '../ledger/decider.ts';
import type { DomainEvent, EventDataByType, StreamEvents } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import { sameHash } from '../keys/index.ts';
import { normalEmail } from './member-decider.ts';

/** The longest a sign-in link may live (the bound). */
export const MAX_LINK_MINUTES = 15;

export interface LinkState {
  status: 'none' | 'issued' | 'used';
  linkId: string;
  email: string;
  hash: string;
  expiresAt: string;
}

export type LinkCommand =
  { type: 'IssueLink'; linkId: string; email: string; hash: string; now: Date; minutes: number } | { type: 'UseLink'; email: string; hash: string; now: Date };

/** One refusal for every way a link can be wrong: a guesser learns nothing from it. */
export const badLink = () => new DomainError('invalid', 'This sign-in link is not valid, has expired or was already used: ask for a new one.');

export const linkDecider: Decider<LinkState, LinkCommand, StreamEvents['signInLink']> = {
  initialState: () => ({ status: 'none', linkId: '', email: '', hash: '', expiresAt: '' }),
  decide(c, s) {
    if (c.type === 'IssueLink') {
      if (s.status !== 'none') throw new DomainError('already_exists', `link ${c.linkId} exists`);
      const minutes = Math.min(Math.max(c.minutes, 1), MAX_LINK_MINUTES);
      const expiresAt = new Date(c.now.getTime() + minutes * 60_000).toISOString();
      return [{ type: 'SignInLinkIssued', data: { linkId: c.linkId, email: normalEmail(c.email), hash: c.hash, expiresAt } }];
    }
    const fits = s.status === 'issued' && sameHash(s.hash, c.hash) && s.email === normalEmail(c.email) && c.now.getTime() < Date.parse(s.expiresAt);
    if (!fits) throw badLink();
    return [{ type: 'SignInLinkUsed', data: { linkId: s.linkId, email: s.email } }];
  },
  evolve(s, e: DomainEvent) {
    if (e.type === 'SignInLinkIssued') return { status: 'issued', linkId: e.data.linkId, email: e.data.email, hash: e.data.hash, expiresAt: e.data.expiresAt };
    if (e.type === 'SignInLinkUsed') return { ...s, status: 'used' };
    return s;
  },
};

export interface SessionState {
  status: 'none' | 'active' | 'ended';
  sessionId: string;
  email: string;
  hash: string;
  method: 'email' | 'oidc';
  expiresAt: string;
}

export type SessionCommand =
  | ({ type: 'Start' } & Omit<EventDataByType['SessionStarted'], 'email'> & { email: string })
  | { type: 'End'; reason: EventDataByType['SessionEnded']['reason'] };

export const sessionDecider: Decider<SessionState, SessionCommand, StreamEvents['session']> = {
  initialState: () => ({ status: 'none', sessionId: '', email: '', hash: '', method: 'email', expiresAt: '' }),
  decide(c, s) {
    if (c.type === 'Start') {
      if (s.status !== 'none') throw new DomainError('already_exists', `session ${c.sessionId} exists`);
      const { type: _, ...data } = c;
      return [{ type: 'SessionStarted', data: { ...data, email: normalEmail(c.email) } }];
    }
    if (s.status !== 'active') return [];
    return [{ type: 'SessionEnded', data: { sessionId: s.sessionId, email: s.email, reason: c.reason } }];
  },
  evolve(s, e: DomainEvent) {
    if (e.type === 'SessionStarted') return { status: 'active', ...e.data };
    if (e.type === 'SessionEnded') return { ...s, status: 'ended' };
    return s;
  },
};

/** Whether a session's cookie secret opens it at `now`. */
export const sessionOpens = (s: SessionState, hash: string, now: Date): boolean =>
  s.status === 'active' && sameHash(s.hash, hash) && now.getTime() < Date.parse(s.expiresAt);

/** The UTC minute of an instant as yyyymmddhhmm: the window sign-in requests are counted in. */
export const utcMinute = (at: Date): string => at.toISOString().slice(0, 16).replace(/[-T:]/g, '');

/**
 * Sign-in requests for one address in one UTC minute, on a stream of their own: the decider records
 * none past the limit, and the store's optimistic concurrency makes the count exact across gateways.
 */
export const signInAttemptsDecider: Decider<
  { requests: number },
  { type: 'Request'; address: string; minute: string; limit: number },
  StreamEvents['signInAttempts']
> = {
  initialState: () => ({ requests: 0 }),
  decide: (c, s) => (s.requests >= c.limit ? [] : [{ type: 'SignInRequested', data: { address: c.address, minute: c.minute } }]),
  evolve: (s, e) => (e.type === 'SignInRequested' ? { requests: s.requests + 1 } : s),
};
