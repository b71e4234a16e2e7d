// The billing page of /app for a signed-in member whose role includes billing (owner, billing):
// the balance, the price list with Stripe Checkout, redeeming a code, payments with receipts,
// statements and the usage CSV. A member without the billing role is told so and sees none of it
// (the server refuses those calls too, with a 403).
import { useEffect, useState } from 'preact/hooks';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import type { Subscription } from '../../shared/v1.ts';
import { SubscriptionCard } from '../usage/SubscriptionCard.tsx';
import { BillingHeader } from './BillingHeader.tsx';
import { CheckoutReturn, checkoutOutcome } from './CheckoutReturn.tsx';
import { Downloads } from './Downloads.tsx';
import { PaymentsTable } from './PaymentsTable.tsx';
import { PriceList } from './PriceList.tsx';
import { RedeemCode } from './RedeemCode.tsx';
import { MEMBER_ADVICE, accountPath, json, loadSession, type SessionInfo } from './session-api.ts';
import type { Payment, PriceList as Prices } from './types.ts';
import type { ApiProblem } from '../../shared/problem.ts';

const BILLING_ROLES = new Set(['owner', 'billing']);

export function BillingPage() {
  const [session, setSession] = useState<SessionInfo | null>(null);
  const [signedOut, setSignedOut] = useState(false);
  const [problem, setProblem] = useState<unknown>(null);
  const [accountId, setAccountId] = useState('');

  useEffect(() => {
    loadSession()
      .then((s) => {
        setSession(s);
        const wanted = new URLSearchParams(location.search).get('account');
        const billable = s.accounts.filter((a) => BILLING_ROLES.has(a.role));
        setAccountId((billable.find((a) => a.account_id === wanted) ?? billable[0])?.account_id ?? '');
      })
      .catch((err: ApiProblem) => (err.status === 401 ? setSignedOut(true) : setProblem(err)));
  }, []);

  const billable = session?.accounts.filter((a) => BILLING_ROLES.has(a.role)) ?? [];
  return (
    <>
      <a class="skip-link" href="#billing-heading">
        Skip to billing
      </a>
      <BillingHeader email={session?.email ?? null} onProblem={setProblem} />
      <main class="billing-layout">
        <div class="billing-head">
          <h1 id="billing-heading" tabIndex={-1}>
            Billing
          </h1>
          {billable.length > 1 && (
            <div class="field">
              <label for="account">Account</label>
              <select id="account" value={accountId} onChange={(e) => setAccountId((e.target as HTMLSelectElement).value)}>
                {billable.map((a) => (
                  <option key={a.account_id} value={a.account_id}>
                    {a.account_id} ({a.role})
                  </option>
                ))}
              </select>
            </div>
          )}
        </div>
        <ProblemRegion problem={problem} advice={MEMBER_ADVICE} onDismiss={() => setProblem(null)} />
        {signedOut ? (
          <section class="card notice" id="signed-out">
            <h2>Sign in to see billing</h2>
            <p>Billing is for signed-in members of an account. People who only have an API key see their quota on the chat and usage pages.</p>
            <a class="button" href="sign-in">
              Sign in
            </a>
          </section>
        ) : !session ? (
          <p class="loading">Loading your session…</p>
        ) : !accountId ? (
          <section class="card notice" id="no-billing">
            <h2>Billing is not part of your role</h2>
            <p>Buying, codes, payments and statements are for an account’s owners and billing members. Ask an owner to change your role.</p>
          </section>
        ) : (
          <AccountBilling key={accountId} accountId={accountId} onProblem={setProblem} />
        )}
      </main>
    </>
  );
}

interface Loaded {
  sub: Subscription | null;
  prices: Prices | null;
  payments: Payment[] | null;
}

function AccountBilling({ accountId, onProblem }: { accountId: string; onProblem: (err: unknown) => void }) {
  const [data, setData] = useState<Loaded>({ sub: null, prices: null, payments: null });
  const [busy, setBusy] = useState(true);
  const [reloads, setReloads] = useState(0);
  const [outcome] = useState(checkoutOutcome);
  const reload = () => setReloads((n) => n + 1);

  useEffect(() => {
    let current = true;
    setBusy(true);
    Promise.allSettled([
      json<Subscription>(accountPath(accountId, 'subscription')),
      json<Prices>(accountPath(accountId, 'prices')),
      json<{ data: Payment[] }>(accountPath(accountId, 'payments')),
    ]).then(([sub, prices, payments]) => {
      if (!current) return;
      setBusy(false);
      setData((old) => ({
        sub: sub.status === 'fulfilled' ? sub.value : old.sub,
        prices: prices.status === 'fulfilled' ? prices.value : old.prices,
        payments: payments.status === 'fulfilled' ? payments.value.data : old.payments,
      }));
      const failed = [sub, prices, payments].find((r) => r.status === 'rejected');
      if (failed) onProblem((failed as PromiseRejectedResult).reason);
    });
    return () => {
      current = false;
    };
  }, [accountId, reloads]);

  return (
    <div class="billing-grid">
      <div class="billing-side">
        <CheckoutReturn outcome={outcome} payments={data.payments} onWait={reload} />
        <SubscriptionCard sub={data.sub} busy={busy} message={busy ? 'Loading the balance…' : 'The balance could not be loaded.'} />
        <button type="button" id="billing-refresh" class="secondary small" onClick={reload}>
          Refresh
        </button>
        <RedeemCode accountId={accountId} onRedeemed={reload} onProblem={onProblem} />
      </div>
      <div class="billing-main">
        <PriceList accountId={accountId} prices={data.prices} onProblem={onProblem} />
        <PaymentsTable accountId={accountId} payments={data.payments} onProblem={onProblem} />
        <Downloads accountId={accountId} onProblem={onProblem} />
      </div>
    </div>
  );
}
