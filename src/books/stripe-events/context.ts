// What a Stripe notice's handler is given: the Stripe client, the ledger and payments to book
// through, the log, the dispute setting, and (on a replay) a way to tell that a later notice
// superseded this one. Built per notice, over a ledger that counts what the notice appended, so a
// replay can say whether a notice changed anything.
import type Stripe from 'stripe';
import type { Logger } from 'pino';
import type { Ledger } from '../../ledger/ledger.ts';
import type { TaxSettings } from '../../money/tax.ts';
import { createPayments, type Payments } from '../payments.ts';

/** What a handler answers Stripe with (`outcome` in the webhook's 200), and a replay reports. */
export type Outcome =
  | 'recorded'
  | 'already_recorded'
  | 'unmatched'
  | 'waiting'
  | 'failed'
  | 'cancelled'
  | 'resumed'
  | 'refunded'
  | 'disputed'
  | 'dispute_closed'
  | 'ignored'
  /** A replay only: a later notice about the same object carries its newer state, so this one is not run. */
  | 'superseded';

export interface StripeContext {
  stripe: Stripe;
  ledger: Ledger;
  payments: Payments;
  log: Logger;
  disputeSuspendsKeys: boolean;
  /** On a replay: the id of a later stored notice of `types` about the same object, or null. Null when live. */
  supersededBy: ((types: readonly string[]) => Promise<string | null>) | null;
}

export const ACTOR = 'stripe:webhook';

export const idOf = (v: string | { id: string } | null | undefined): string | null => (typeof v === 'string' ? v : (v?.id ?? null));

/** The ledger with a count of the events appended through it (each is a decision's events). */
function counting(ledger: Ledger): { ledger: Ledger; appended: () => number } {
  let appended = 0;
  const count = async <R extends { events: readonly unknown[] }>(result: Promise<R>): Promise<R> => {
    const r = await result;
    appended += r.events.length;
    return r;
  };
  const counted: Ledger = {
    ...ledger,
    command: ((...args: Parameters<Ledger['command']>) => count(ledger.command(...args))) as Ledger['command'],
  };
  return { ledger: counted, appended: () => appended };
}

/** A handler's context for one notice, and how many events it has appended so far. */
export function contextFor(base: Omit<StripeContext, 'ledger' | 'payments'> & { ledger: Ledger; tax: TaxSettings }): {
  ctx: StripeContext;
  appended: () => number;
} {
  const { ledger, appended } = counting(base.ledger);
  const { tax, ...rest } = base;
  return { ctx: { ...rest, ledger, payments: createPayments(ledger, tax) }, appended };
}

/** The PaymentIntent with its charge's balance transaction: the account it names and the fee. */
export async function intent(ctx: StripeContext, id: string) {
  const pi = await ctx.stripe.paymentIntents.retrieve(id, { expand: ['latest_charge.balance_transaction'] });
  const charge = typeof pi.latest_charge === 'object' ? pi.latest_charge : null;
  const bt = charge && typeof charge.balance_transaction === 'object' ? charge.balance_transaction : null;
  return {
    metadata: pi.metadata ?? {},
    fee: bt ? bt.fee : null,
    /** Stripe takes its fee in the balance's currency (the Stripe account's), which may not be the charge's. */
    feeCurrency: bt ? bt.currency.toUpperCase() : null,
    amount: pi.amount_received || pi.amount,
    currency: pi.currency.toUpperCase(),
    succeeded: pi.status === 'succeeded',
  };
}
