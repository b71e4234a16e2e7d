// The price list: the plans and packs on sale, each with a Buy button that opens Stripe Checkout
// (the page goes to Stripe's URL; Stripe sends the member back to /app/billing). A plan renews
// every period unless the member unticks it. When items are also offered in other currencies, a
// "Pay in" select shows every price in the chosen one (an item not sold in it cannot be bought in
// it); a payment in another currency is booked in the settlement currency at the day's rate.
import { useState } from 'preact/hooks';
import { fmt } from '../../shared/format.ts';
import { Loading } from '../../shared/components/Page.tsx';
import type { BillingApi } from './api.ts';
import type { OfferedPrice, PriceList as Prices } from './types.ts';

interface Props {
  api: BillingApi;
  prices: Prices | null;
  onProblem: (err: unknown) => void;
}

type Priced = { amount: number; currency: string; display: string; offered?: OfferedPrice[] };

/** An item's price in `currency`: its own in the settlement currency, else the one it is offered at (null: not sold in it). */
const priceIn = (item: Priced, currency: string): OfferedPrice | null =>
  item.currency === currency ? item : ((item.offered ?? []).find((o) => o.currency === currency) ?? null);

/** The currencies to pay in, the settlement currency first. */
const currenciesOf = (prices: Prices): string[] => [prices.currency, ...(prices.currencies ?? []).filter((c) => c !== prices.currency)];

export function PriceList({ api, prices, onProblem }: Props) {
  const [busy, setBusy] = useState<string | null>(null);
  const [recurring, setRecurring] = useState(true);
  const [chosen, setChosen] = useState<string | null>(null);
  const currencies = prices ? currenciesOf(prices) : [];
  // The settlement currency until another is picked (and if the picked one is no longer offered).
  const payIn = chosen && currencies.includes(chosen) ? chosen : (prices?.currency ?? '');
  const buy = async (item: { plan_id: string } | { pack_id: string }, label: string) => {
    setBusy(label);
    try {
      const body = 'plan_id' in item ? { ...item, recurring } : item;
      // The currency goes with the purchase only when it is not the settlement one.
      const session = await api.checkout(prices && payIn !== prices.currency ? { ...body, currency: payIn } : body);
      location.assign(session.url);
    } catch (err) {
      setBusy(null);
      onProblem(err);
    }
  };
  const button = (item: { plan_id: string } | { pack_id: string }, name: string, price: OfferedPrice | null) => (
    <button
      type="button"
      class="small"
      disabled={busy !== null || !price}
      aria-busy={busy === name ? 'true' : undefined}
      aria-label={price ? `Buy ${name} for ${price.display} ${price.currency}` : `Buy ${name}: not sold in ${payIn}`}
      onClick={() => buy(item, name)}
    >
      {busy === name ? 'Opening Checkout…' : 'Buy'}
    </button>
  );
  const amount = (price: OfferedPrice | null) => (
    <span class={price ? 'price-amount' : 'price-amount price-missing'}>{price ? `${price.display} ${price.currency}` : `Not sold in ${payIn}`}</span>
  );
  return (
    <section class="card" aria-labelledby="prices-heading">
      <h2 id="prices-heading">Buy tokens</h2>
      {!prices ? (
        <Loading text="Loading the prices…" />
      ) : (
        <>
          {currencies.length > 1 && (
            <div class="field pay-in">
              <label for="pay-in">Pay in</label>
              <select
                id="pay-in"
                aria-describedby="pay-in-help"
                value={payIn}
                disabled={busy !== null}
                onChange={(e) => setChosen((e.target as HTMLSelectElement).value)}
              >
                {currencies.map((c) => (
                  <option key={c} value={c}>
                    {c}
                  </option>
                ))}
              </select>
              <p id="pay-in-help" class="help">
                {payIn === prices.currency
                  ? `Prices are in ${prices.currency}, the currency the account is billed in.`
                  : `You pay in ${payIn}; it is booked in ${prices.currency} at the day’s exchange rate.`}
              </p>
            </div>
          )}
          <h3 class="price-group">Packs of extra tokens</h3>
          {prices.packs.length ? (
            <ul class="price-list" id="packs">
              {prices.packs.map((p) => (
                <li key={p.pack_id} data-pack={p.pack_id}>
                  <span class="price-name">{p.name}</span>
                  <span class="price-what">{fmt(p.tokens)} tokens, kept until used</span>
                  {amount(priceIn(p, payIn))}
                  {button({ pack_id: p.pack_id }, p.name, priceIn(p, payIn))}
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
                    {amount(priceIn(p, payIn))}
                    {button({ plan_id: p.plan_id }, `the ${p.name} plan`, priceIn(p, payIn))}
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
