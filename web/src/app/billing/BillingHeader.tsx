// The billing page's own header until the signed-in /app shell takes it over: the brand, the
// pages, who is signed in and a sign-out button (which ends the session on the server).
import { useState } from 'preact/hooks';
import { call } from './session-api.ts';

const PAGES = [
  { href: 'chat', label: 'Chat' },
  { href: 'usage', label: 'Usage' },
  { href: 'billing', label: 'Billing' },
];

export function BillingHeader({ email, onProblem }: { email: string | null; onProblem: (err: unknown) => void }) {
  const [busy, setBusy] = useState(false);
  const signOut = async () => {
    setBusy(true);
    try {
      await call('sign-out', { method: 'POST', body: {} });
      location.assign('sign-in');
    } catch (err) {
      setBusy(false);
      onProblem(err);
    }
  };
  return (
    <header class="topbar">
      <a class="brand" href="chat">
        <img src="assets/icon.svg" alt="" width={24} height={24} /> Tollgate
      </a>
      <nav aria-label="Pages">
        {PAGES.map((p) => (
          <a key={p.href} href={p.href} aria-current={p.href === 'billing' ? 'page' : undefined}>
            {p.label}
          </a>
        ))}
      </nav>
      {email && (
        <div class="signed-in">
          <span class="who-email" title={email}>
            {email}
          </span>
          <button type="button" class="secondary small" disabled={busy} onClick={signOut}>
            Sign out
          </button>
        </div>
      )}
    </header>
  );
}
