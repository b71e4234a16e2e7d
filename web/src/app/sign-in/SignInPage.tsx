// The sign-in page of /app: an email link (the mailed link comes back here with its address and
// token in the fragment, which is sent to the verify call and then wiped), the OpenID Connect
// button when the operator configured a provider, and sign-up when the operator opened it.
import { useEffect, useState } from 'preact/hooks';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { MEMBER_ADVICE } from '../api/client.ts';
import { signInApi } from '../api/session.ts';
import type { SignInOptions } from '../api/types.ts';
import { EmailLinkForm } from './EmailLinkForm.tsx';

const LINK_ADVICE = {
  ...MEMBER_ADVICE,
  400: ['This link does not work', 'It was used already, has expired or is for another address. Ask for a new one below.'] as [string, string],
};

/** Where to go after signing in: a page of the shell named in ?next=, else its first page. */
function nextPage(): string {
  const next = new URLSearchParams(location.search).get('next') ?? '';
  return /^[a-z-]{1,40}$/.test(next) && next !== 'sign-in' ? next : 'home';
}

function linkInFragment(): { email: string; token: string } | null {
  const f = new URLSearchParams(location.hash.slice(1));
  const email = f.get('email');
  const token = f.get('token');
  return email && token ? { email, token } : null;
}

export function SignInPage() {
  const [options, setOptions] = useState<SignInOptions | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [status, setStatus] = useState('');

  useEffect(() => {
    signInApi.options().then(setOptions, setProblem);
    const useLink = () => {
      const link = linkInFragment();
      if (!link) return;
      setStatus('Signing you in…');
      setProblem(null);
      // The token leaves the address bar (and the history) before anything else happens.
      history.replaceState(null, '', location.pathname + location.search);
      signInApi.useLink(link.email, link.token).then(
        () => location.replace(nextPage()),
        (err) => {
          setStatus('');
          setProblem(err);
        },
      );
    };
    useLink();
    // A link opened while this page is open changes only the fragment.
    addEventListener('hashchange', useLink);
    return () => removeEventListener('hashchange', useLink);
  }, []);

  return (
    <>
      <a class="skip-link" href="#sign-in-heading">
        Skip to sign-in
      </a>
      <header class="topbar">
        <span class="brand">
          <img src="assets/icon.svg" alt="" width={24} height={24} /> Tollgate
        </span>
      </header>
      <main class="shell-main narrow">
        <h1 id="sign-in-heading" tabIndex={-1}>
          Sign in
        </h1>
        <p class="muted" role="status" aria-live="polite" id="sign-in-status">
          {status}
        </p>
        <ProblemRegion id="problem" problem={problem} advice={LINK_ADVICE} onDismiss={() => setProblem(null)} />
        <section class="card" aria-labelledby="email-heading">
          <h2 id="email-heading">With an email link</h2>
          <EmailLinkForm id="sign-in" button="Email me a sign-in link" onProblem={setProblem} />
        </section>
        {options?.oidc && (
          <section class="card" aria-labelledby="oidc-heading">
            <h2 id="oidc-heading">With your organisation’s account</h2>
            <a class="button" id="oidc-sign-in" href={signInApi.oidcUrl()}>
              Sign in with {options.oidc.name}
            </a>
          </section>
        )}
        {options?.sign_up.open && (
          <section class="card" aria-labelledby="sign-up-heading">
            <h2 id="sign-up-heading">New here? Create an account</h2>
            <p class="help">
              Enter your address: the link we send you opens a new account that you own
              {options.sign_up.plan ? `, on the ${options.sign_up.plan} plan` : ''}.
            </p>
            <EmailLinkForm id="sign-up" button="Create my account" onProblem={setProblem} />
          </section>
        )}
        <p class="help">
          Have only an API key? Use <a href="chat">Chat</a> and <a href="usage">Usage</a> with it.
        </p>
      </main>
    </>
  );
}
