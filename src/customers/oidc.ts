// Sign-in through the OpenID Connect provider the operator configured, with openid-client (a
// certified relying party): authorization code flow with PKCE (S256), state and nonce, all three
// checked by the library at the callback. The provider must vouch for the address (email_verified).
import * as oidc from 'openid-client';
import { DomainError } from '../ledger/errors.ts';
import type { CustomerSettings } from '../config.ts';

/** What the browser keeps between the redirect and the callback (an HttpOnly cookie). */
export interface OidcTransaction {
  state: string;
  nonce: string;
  verifier: string;
}

const LOOPBACK = /^http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(\/|$)/;

export function createOidc(settings: NonNullable<CustomerSettings['oidc']>) {
  let config: Promise<oidc.Configuration> | null = null;
  // Discovered on first use (the provider may start after the gateway); a failure is retried next time.
  const configuration = () => {
    config ??= oidc
      .discovery(
        new URL(settings.issuer),
        settings.clientId,
        settings.clientSecret,
        undefined,
        // Plain http only for a provider on this machine (development and tests).
        LOOPBACK.test(settings.issuer) ? { execute: [oidc.allowInsecureRequests] } : undefined,
      )
      .catch((err) => {
        config = null;
        throw err;
      });
    return config;
  };

  return {
    name: settings.name,
    /** TOLLGATE_OIDC_REDIRECT_URI, when /app is reached at another origin than the request's. */
    redirectUri: settings.redirectUri,
    /** The provider's authorization URL and the checks the callback needs. */
    async start(redirectUri: string): Promise<{ url: string; transaction: OidcTransaction }> {
      const transaction = { state: oidc.randomState(), nonce: oidc.randomNonce(), verifier: oidc.randomPKCECodeVerifier() };
      const url = oidc.buildAuthorizationUrl(await configuration(), {
        redirect_uri: redirectUri,
        scope: 'openid email',
        code_challenge: await oidc.calculatePKCECodeChallenge(transaction.verifier),
        code_challenge_method: 'S256',
        state: transaction.state,
        nonce: transaction.nonce,
      });
      return { url: url.href, transaction };
    },
    /** The verified address of the person the provider sent back, or a refusal (nothing started). */
    async finish(callbackUrl: URL, transaction: OidcTransaction): Promise<string> {
      const tokens = await oidc
        .authorizationCodeGrant(await configuration(), callbackUrl, {
          pkceCodeVerifier: transaction.verifier,
          expectedState: transaction.state,
          expectedNonce: transaction.nonce,
          idTokenExpected: true,
        })
        .catch((err: Error) => {
          throw new DomainError('invalid', `The sign-in with ${settings.name} failed: ${err.message.slice(0, 200)}`);
        });
      const idToken = tokens.claims();
      // Providers that keep scope claims out of the ID token give them at the userinfo endpoint (for the same subject).
      const claims =
        idToken && typeof idToken.email === 'string'
          ? idToken
          : idToken
            ? await oidc.fetchUserInfo(await configuration(), tokens.access_token, idToken.sub)
            : null;
      if (!claims || typeof claims.email !== 'string' || claims.email_verified !== true)
        throw new DomainError('forbidden', `${settings.name} did not vouch for an email address (email and email_verified claims).`);
      return claims.email;
    },
  };
}

export type Oidc = ReturnType<typeof createOidc>;
