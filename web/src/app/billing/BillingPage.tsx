// The billing page inside the /app shell, for a member whose role includes billing (owner,
// billing): the balance, the price list with Stripe Checkout, redeeming a code, balance alerts and
// auto top-up, the billing details
// invoices are made out to, payments with receipts, invoices and credit notes, statements and the usage CSV. The shell neither links nor opens it for other roles,
// and the server refuses them every billing call (403).
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import type { Subscription } from '../../shared/v1.ts';
import { MEMBER_ADVICE } from '../api/client.ts';
import { useShell } from '../shell/context.ts';
import { SubscriptionCard } from '../usage/SubscriptionCard.tsx';
import { billingApi } from './api.ts';
import { AutoTopUp } from './AutoTopUp.tsx';
import { BalanceAlerts } from './BalanceAlerts.tsx';
import { BillingDetails } from './BillingDetails.tsx';
import { CheckoutReturn, checkoutOutcome } from './CheckoutReturn.tsx';
import { Downloads } from './Downloads.tsx';
import { InvoicesTable } from './InvoicesTable.tsx';
import { PaymentsTable } from './PaymentsTable.tsx';
import { PriceList } from './PriceList.tsx';
import { RedeemCode } from './RedeemCode.tsx';
import type { Payment, PriceList as Prices } from './types.ts';

/** A refused code or purchase (a currency the item is not sold in, or not payable in yet) reads as what to check, beside the shell's wording for the rest. */
const BILLING_ADVICE: typeof MEMBER_ADVICE = {
  ...MEMBER_ADVICE,
  400: [
    'The request was not accepted',
    'Check what you entered: a code exactly as you received it (each code works once), or pay in a currency the item is sold in, then try again.',
  ],
  409: [
    'Not possible right now',
    'This cannot be paid in that currency yet, or the account changed meanwhile: pay in another currency, or reload and try again.',
  ],
};

interface Loaded {
  sub: Subscription | null;
  prices: Prices | null;
  payments: Payment[] | null;
}

export function BillingPage() {
  const { account } = useShell();
  const api = useMemo(() => billingApi(account.account_id), [account.account_id]);
  const [data, setData] = useState<Loaded>({ sub: null, prices: null, payments: null });
  const [problem, setProblem] = useState<unknown>(null);
  const [busy, setBusy] = useState(true);
  const [reloads, setReloads] = useState(0);
  const [outcome] = useState(checkoutOutcome);
  const reload = () => setReloads((n) => n + 1);

  useEffect(() => {
    let current = true;
    setBusy(true);
    Promise.allSettled([api.subscription(), api.prices(), api.payments()]).then(([sub, prices, payments]) => {
      if (!current) return;
      setBusy(false);
      // A failed read keeps what was shown before; the alert says what went wrong.
      setData((old) => ({
        sub: sub.status === 'fulfilled' ? sub.value : old.sub,
        prices: prices.status === 'fulfilled' ? prices.value : old.prices,
        payments: payments.status === 'fulfilled' ? payments.value : old.payments,
      }));
      const failed = [sub, prices, payments].find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) setProblem(failed.reason);
    });
    return () => {
      current = false;
    };
  }, [api, reloads]);

  return (
    <>
      <div class="billing-head">
        <h1 id="billing-heading">Billing</h1>
        <button type="button" id="billing-refresh" class="secondary small" onClick={reload}>
          Refresh
        </button>
      </div>
      <ProblemRegion id="problem" problem={problem} advice={BILLING_ADVICE} onDismiss={() => setProblem(null)} />
      <CheckoutReturn outcome={outcome} payments={data.payments} onWait={reload} />
      <div class="billing-grid">
        <div class="billing-side">
          <SubscriptionCard sub={data.sub} busy={busy} message={busy ? 'Loading the balance…' : 'The balance could not be loaded.'} />
          <RedeemCode api={api} onRedeemed={reload} onProblem={setProblem} />
          <BalanceAlerts api={api} reloads={reloads} onProblem={setProblem} />
          <AutoTopUp api={api} packs={data.prices?.packs ?? null} reloads={reloads} onProblem={setProblem} />
        </div>
        <div class="billing-main">
          <PriceList api={api} prices={data.prices} onProblem={setProblem} />
          <PaymentsTable api={api} payments={data.payments} onProblem={setProblem} />
          <InvoicesTable api={api} reloads={reloads} onProblem={setProblem} />
          <Downloads api={api} onProblem={setProblem} />
          <BillingDetails api={api} onProblem={setProblem} />
        </div>
      </div>
    </>
  );
}
