// The price list: the plans and packs on sale, each with a Buy button that opens Stripe Checkout
// (the page goes to Stripe's URL; Stripe sends the member back to /app/billing). A plan renews
// every period unless the member unticks it.
import { useState } from 'preact/hooks';
import { fmt } from '../../shared/format.ts';
import { Loading } from '../../shared/components/Page.tsx';
import type { BillingApi } from './api.ts';
import type { PriceList as Prices } from './types.ts';

interface Props {
  api: BillingApi;
  prices: Prices | null;
  onProblem: (err: unknown) => void;
}

export function PriceList({ api, prices, onProblem }: Props) {
  const [busy, setBusy] = useState<string | null>(null);
  const [recurring, setRecurring] = useState(true);
  const buy = async (item: { plan_id: string } | { pack_id: string }, label: string) => {
    setBusy(label);
    try {
      const session = await api.checkout('plan_id' in item ? { ...item, recurring } : item);
      location.assign(session.url);
    } catch (err) {
      setBusy(null);
      onProblem(err);
    }
  };
  const button = (item: { plan_id: string } | { pack_id: string }, name: string, display: string, currency: string) => (
    <button
      type="button"
      class="small"
      disabled={busy !== null}
      aria-busy={busy === name ? 'true' : undefined}
      aria-label={`Buy ${name} for ${display} ${currency}`}
      onClick={() => buy(item, name)}
    >
      {busy === name ? 'Opening Checkout…' : 'Buy'}
    </button>
  );
  return (
    <section class="card" aria-labelledby="prices-heading">
      <h2 id="prices-heading">Buy tokens</h2>
      {!prices ? (
        <Loading text="Loading the prices…" />
      ) : (
        <>
          <h3 class="price-group">Packs of extra tokens</h3>
          {prices.packs.length ? (
            <ul class="price-list" id="packs">
              {prices.packs.map((p) => (
                <li key={p.pack_id} data-pack={p.pack_id}>
                  <span class="price-name">{p.name}</span>
                  <span class="price-what">{fmt(p.tokens)} tokens, kept until used</span>
                  <span class="price-amount">
                    {p.display} {p.currency}
                  </span>
                  {button({ pack_id: p.pack_id }, p.name, p.display, p.currency)}
                </li>
              ))}
            </ul>
          ) : (
            <p class="help">No packs are on sale.</p>
          )}
          <h3 class="price-group">Main plans</h3>
          {prices.plans.length ? (
            <>
              <ul class="price-list" id="plans">
                {prices.plans.map((p) => (
                  <li key={p.plan_id} data-plan={p.plan_id}>
                    <span class="price-name">{p.name}</span>
                    <span class="price-what">{recurring ? 'per period, renewed until cancelled' : 'one period'}</span>
                    <span class="price-amount">
                      {p.display} {p.currency}
                    </span>
                    {button({ plan_id: p.plan_id }, `the ${p.name} plan`, p.display, p.currency)}
                  </li>
                ))}
              </ul>
              <label class="check">
                <input type="checkbox" id="recurring" checked={recurring} onChange={(e) => setRecurring((e.target as HTMLInputElement).checked)} />
                Renew the plan every period
              </label>
            </>
          ) : (
            <p class="help">No plans are on sale.</p>
          )}
          <p class="help">You pay on Stripe’s page and come back here. The tokens are added once Stripe confirms the payment.</p>
        </>
      )}
    </section>
  );
}
