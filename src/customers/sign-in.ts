// Sign-in by email link: a request for a link gets the same answer whether the address is known
// or not (and the same 429 past the per-address limit, counted on every gateway); a link goes only to an address that is a
// member, is invited, or may sign up. Using a link (once, in time, for its own address) starts a
// session; joining invitations and sign-up happen there, for OpenID Connect sign-ins too.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import { hashKey } from '../keys/index.ts';
import { badLink, linkDecider, signInAttemptsDecider, utcMinute } from './sign-in-decider.ts';
import { ApiError } from '../http/errors.ts';
import { normalEmail } from './member-decider.ts';
import { failureThrottle } from '../http/failure-throttle.ts';
import type { CustomerSettings } from '../config.ts';
import type { Mailer } from './mailer.ts';
import { accountsOf, foundAccount, isKnown, joinInvitations } from './members.ts';
import { randomSecret, startSession } from './sessions.ts';

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,189}\.[^\s@]{1,60}$/;
const TOKEN = /^(lnk_[0-9a-f]{24})\.([A-Za-z0-9_-]{43})$/;

export function requireEmail(v: unknown): string {
  if (typeof v !== 'string' || v.length > 254 || !EMAIL.test(v.trim()))
    throw new DomainError('invalid', "'email' must be an email address.", { param: 'email' });
  return normalEmail(v);
}

export function createSignIn(opts: { ledger: Ledger; mailer: Mailer; settings: CustomerSettings; log: Logger }) {
  const { ledger, mailer, settings, log } = opts;
  const attempts = failureThrottle(settings.signInAttemptsPerMinute);

  async function sendLink(email: string, origin: string) {
    const linkId = `lnk_${randomUUID().replace(/-/g, '').slice(0, 24)}`;
    const secret = randomSecret();
    await ledger.command(
      linkDecider,
      streams.signInLink(linkId),
      { type: 'IssueLink', linkId, email, hash: hashKey(secret), now: new Date(), minutes: settings.linkMinutes },
      metadataFor(`person:${email}`),
    );
    // In the fragment: never sent to a server, so never in an access log or a Referer.
    const link = `${origin}/app/sign-in#email=${encodeURIComponent(email)}&token=${linkId}.${secret}`;
    await mailer.sendSignInLink({ to: email, link, minutes: settings.linkMinutes });
  }

  /**
   * The same limit across gateways: each request is a SignInRequested (the address as its hash) on
   * the address's stream for the UTC minute, and none is recorded past the limit (then the same 429
   * as this process's own window gives, for a known and an unknown address alike).
   */
  async function countOnEveryGateway(email: string, now = new Date()) {
    const address = hashKey(email);
    const minute = utcMinute(now);
    const limit = settings.signInAttemptsPerMinute;
    const res = await ledger.command(
      signInAttemptsDecider,
      streams.signInAttempts(address, minute),
      { type: 'Request', address, minute, limit },
      metadataFor('person:anonymous'),
    );
    if (res.events.length > 0) return;
    const retry = Math.max(1, 60 - now.getUTCSeconds());
    throw new ApiError(429, `Too many sign-in requests for this address in the last minute: retry after ${retry}s.`, 'requests', 'too_many_failures', null, {
      'retry-after': String(retry),
    });
  }

  return {
    /** Always the same outcome for the caller; the link is sent in the background. */
    async requestLink(rawEmail: unknown, origin: string): Promise<void> {
      const email = requireEmail(rawEmail);
      attempts.check(email, 'sign-in requests for this address');
      attempts.record(email);
      await countOnEveryGateway(email);
      const mayHaveLink = settings.signUpOpen || (await isKnown(ledger, email));
      if (!mayHaveLink) return;
      // Not awaited: the answer takes as long for an unknown address as for a known one.
      void sendLink(email, origin).catch((err: Error) => log.error({ err: err.message }, 'sign-in link not sent'));
    },

    /** Uses a link (once) and starts a session for its address. */
    async useLink(rawEmail: unknown, token: unknown) {
      const email = requireEmail(rawEmail);
      const m = typeof token === 'string' ? TOKEN.exec(token) : null;
      if (!m) throw badLink();
      await ledger.command(
        linkDecider,
        streams.signInLink(m[1]),
        { type: 'UseLink', email, hash: hashKey(m[2]), now: new Date() },
        metadataFor(`person:${email}`),
      );
      return signedIn(email, 'email');
    },

    signedIn,
  };

  /** The address is proven: invitations are joined, sign-up founds an account, then a session starts. */
  async function signedIn(email: string, method: 'email' | 'oidc') {
    await joinInvitations(ledger, email);
    if ((await accountsOf(ledger, email)).length === 0) {
      if (!settings.signUpOpen) throw new DomainError('forbidden', 'This address has no account here: ask an owner of your account for an invitation.');
      await foundAccount(ledger, email, settings.signUpPlan);
    }
    return startSession(ledger, email, method, settings.sessionHours);
  }
}

export type SignIn = ReturnType<typeof createSignIn>;
