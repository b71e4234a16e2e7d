// The tax table's rates as Stripe tax rates, so Checkout charges and shows the tax the payment will
// hold. Stripe keeps tax rates for good (they can only be archived), so one is made per distinct
// treatment: found among the account's active rates by what it says (country, name, percentage,
// inclusive) or created, then remembered by this process. Two gateways creating the same rate at
// once make two equal ones, which charge the same.
import type Stripe from 'stripe';
import type { TaxTreatment } from '../money/tax.ts';

const percentageOf = (t: TaxTreatment) => t.rateBasisPoints / 100;
const keyOf = (t: TaxTreatment) => `${t.country}|${t.name}|${t.rateBasisPoints}|${t.inclusive}`;

const sameRate = (r: Stripe.TaxRate, t: TaxTreatment) =>
  r.active && r.country === t.country && r.display_name === t.name && r.percentage === percentageOf(t) && r.inclusive === t.inclusive;

export function stripeTaxRates(stripe: Stripe) {
  const known = new Map<string, Promise<string>>();

  async function findOrCreate(t: TaxTreatment): Promise<string> {
    for await (const r of stripe.taxRates.list({ active: true, inclusive: t.inclusive, limit: 100 })) if (sameRate(r, t)) return r.id;
    const created = await stripe.taxRates.create({
      display_name: t.name,
      percentage: percentageOf(t),
      inclusive: t.inclusive,
      country: t.country,
      metadata: { tollgate: keyOf(t) },
    });
    return created.id;
  }

  return {
    /** The id of the Stripe tax rate charging `t`. */
    idFor(t: TaxTreatment): Promise<string> {
      const key = keyOf(t);
      let id = known.get(key);
      if (!id) {
        id = findOrCreate(t);
        known.set(key, id);
        // A failed look-up is tried again by the next checkout.
        id.catch(() => known.delete(key));
      }
      return id;
    },
  };
}
