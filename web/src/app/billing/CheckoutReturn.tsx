// Coming back from Stripe Checkout (?checkout=paid or ?checkout=cancelled on /app/billing): what
// happened, read out politely. After a payment the tokens arrive with Stripe's notice, usually
// within seconds: the page asks again every few seconds until a fresh card payment is listed.
import { useEffect, useState } from 'preact/hooks';
import { fmt } from '../../shared/format.ts';
import type { Payment } from './types.ts';

export type Outcome = 'paid' | 'cancelled' | null;

const POLL_MS = 3000;
const POLLS = 20;
const FRESH_MS = 15 * 60_000;

/** A query parameter of the page's URL, taken out of it (a reload does not announce it again). */
export function takeFromUrl(name: string): string | null {
  const url = new URL(location.href);
  const value = url.searchParams.get(name);
  if (value === null) return null;
  url.searchParams.delete(name);
  history.replaceState(null, '', url);
  return value;
}

/** The outcome in the URL (?checkout=paid|cancelled), taken out of it. */
export function checkoutOutcome(): Outcome {
  const value = takeFromUrl('checkout');
  return value === 'paid' ? 'paid' : value === 'cancelled' ? 'cancelled' : null;
}

export function CheckoutReturn({ outcome, payments, onWait }: { outcome: Outcome; payments: Payment[] | null; onWait: () => void }) {
  const [polls, setPolls] = useState(0);
  const arrived = payments?.filter((p) => p.processor === 'stripe' && Date.now() - Date.parse(p.received_at) < FRESH_MS).at(-1) ?? null;
  const waiting = outcome === 'paid' && payments !== null && !arrived && polls < POLLS;
  useEffect(() => {
    if (!waiting) return;
    const t = setTimeout(() => {
      setPolls((n) => n + 1);
      onWait();
    }, POLL_MS);
    return () => clearTimeout(t);
  }, [waiting, payments]);

  let text = '';
  if (outcome === 'cancelled') text = 'Checkout was cancelled: nothing was charged.';
  else if (outcome === 'paid' && arrived) text = `Payment confirmed: ${fmt(arrived.item.tokens)} tokens added.`;
  else if (outcome === 'paid' && polls >= POLLS)
    text = 'Stripe took your payment, but its confirmation has not arrived yet. The tokens are added when it does: refresh in a minute.';
  else if (outcome === 'paid') text = 'Thank you: Stripe took your payment. The tokens are added as soon as Stripe confirms it, usually within seconds…';
  return (
    <div id="checkout-status" class={text ? `card notice ${arrived ? 'ok' : ''}` : 'visually-hidden'} role="status" aria-live="polite">
      {text}
    </div>
  );
}
