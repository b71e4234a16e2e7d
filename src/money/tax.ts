// Tax on what a customer pays (issue 43). The operator's table gives each country a rate, a name
// and whether its prices hold the tax (inclusive) or have it added (exclusive). A business abroad
// with a checked tax id accounts for the tax itself (the reverse charge): none is charged. Every
// figure is rounded by the one rule (money.ts, half up): the tax on a price is round(price x
// rate); the tax held in an amount paid is that amount less round(amount / (1 + rate)), which
// gives back exactly the tax added to a price (the error of the first rounding is under half a
// minor unit, and dividing by 1 + rate shrinks it). A refund takes back the tax in proportion,
// by the cumulative rule, so a payment refunded in parts gives back exactly the tax it held.
import type { EventDataByType } from '../ledger/events.ts';
import { bookedAmount, roundExact, valueOf } from './money.ts';

export type TaxApplied = NonNullable<EventDataByType['PaymentReceived']['tax']>;
export type TaxTreatment = Omit<TaxApplied, 'amount'>;

/** One country's row of the tax table. */
export interface TaxRate {
  name: string;
  rateBasisPoints: number;
  inclusive: boolean;
  /** Whether a business of this country, buying from a seller elsewhere, is reverse-charged. */
  reverseCharge: boolean;
}

/** The tax table by ISO 3166-1 alpha-2 country code. A country without a row is not taxed. */
export type TaxTable = ReadonlyMap<string, TaxRate>;

/** What tax is decided by: the operator's table and the seller's own country (a reverse charge needs a buyer elsewhere). */
export interface TaxSettings {
  table: TaxTable;
  sellerCountry: string | null;
}

export const NO_TAX: TaxSettings = { table: new Map(), sellerCountry: null };

/** Who is buying, as far as tax goes: their billing profile's country and tax id (null: no profile). */
export interface TaxBuyer {
  country: string;
  taxId: string | null;
  /** Whether the tax id matched its country's public format: only a checked one earns the reverse charge. */
  taxIdChecked: boolean;
}

const RATE = /^(0|[1-9][0-9]?|100)(\.[0-9]{1,2})?$/;
const COUNTRY = /^[A-Z]{2}$/;

/**
 * The table as the operator writes it (TOLLGATE_TAX_TABLE): a JSON object by country, each
 * `{ "name": "VAT", "rate": "19", "inclusive": false, "reverse_charge": true }` with the rate in
 * percent (up to two decimals). Throws a message naming the first wrong entry.
 */
export function parseTaxTable(json: string): TaxTable {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new Error('the tax table must be a JSON object by country code, such as {"DE":{"name":"VAT","rate":"19"}}');
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new Error('the tax table must be a JSON object by country code');
  const table = new Map<string, TaxRate>();
  for (const [country, entry] of Object.entries(raw as Record<string, unknown>)) {
    const where = `the tax table's entry ${JSON.stringify(country)}`;
    if (!COUNTRY.test(country)) throw new Error(`${where}: a country is an ISO 3166-1 alpha-2 code in capitals, such as DE`);
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) throw new Error(`${where} must be an object with name and rate`);
    const e = entry as Record<string, unknown>;
    const unknownKey = Object.keys(e).find((k) => !['name', 'rate', 'inclusive', 'reverse_charge'].includes(k));
    if (unknownKey) throw new Error(`${where} has an unknown field ${JSON.stringify(unknownKey)} (name, rate, inclusive, reverse_charge)`);
    if (typeof e.name !== 'string' || e.name.trim() === '' || e.name.length > 50) throw new Error(`${where}: name must be 1 to 50 characters`);
    const rate = typeof e.rate === 'number' ? String(e.rate) : e.rate;
    if (typeof rate !== 'string' || !RATE.test(rate))
      throw new Error(`${where}: rate must be a percentage from 0 to 100 with at most two decimals, such as "19" or "7.7"`);
    const [whole, cents = ''] = rate.split('.');
    const rateBasisPoints = Number(whole) * 100 + Number(cents.padEnd(2, '0'));
    if (rateBasisPoints > 10_000) throw new Error(`${where}: rate is over 100 %`);
    for (const flag of ['inclusive', 'reverse_charge'])
      if (e[flag] !== undefined && typeof e[flag] !== 'boolean') throw new Error(`${where}: ${flag} must be true or false`);
    table.set(country, { name: e.name.trim(), rateBasisPoints, inclusive: e.inclusive === true, reverseCharge: e.reverse_charge === true });
  }
  return table;
}

/**
 * How a purchase is taxed: by the buyer's country (the seller's for a buyer without a profile), or
 * not at all (null) where the table has no row for it. A business with a checked tax id, in another
 * country than the seller's, whose row allows it, is reverse-charged: rate 0.
 */
export function taxTreatment(table: TaxTable, sellerCountry: string | null, buyer: TaxBuyer | null): TaxTreatment | null {
  const country = buyer?.country ?? sellerCountry;
  const row = country ? table.get(country) : undefined;
  if (!country || !row) return null;
  const reverseCharge =
    row.reverseCharge && buyer !== null && buyer.taxId !== null && buyer.taxIdChecked && sellerCountry !== null && country !== sellerCountry;
  return {
    country,
    name: reverseCharge ? 'Reverse charge' : row.name,
    rateBasisPoints: reverseCharge ? 0 : row.rateBasisPoints,
    inclusive: row.inclusive,
    reverseCharge,
  };
}

const rateOf = (t: TaxTreatment) => ({ amount: t.rateBasisPoints, per: 10_000 });

/** What the customer pays for a listed price: the price, plus its tax where prices exclude it. */
export function grossPrice(price: number, t: TaxTreatment | null): number {
  return t && !t.inclusive ? price + valueOf(rateOf(t), price) : price;
}

/** The tax held in an amount paid, tax included. */
export function taxInGross(gross: number, t: TaxTreatment | null): number {
  if (!t || t.rateBasisPoints === 0) return 0;
  return gross - Number(roundExact(BigInt(gross) * 10_000n, BigInt(10_000 + t.rateBasisPoints)));
}

/** The tax applied to a payment of `gross`, as its event records it (null: untaxed). */
export function taxApplied(gross: number, t: TaxTreatment | null): TaxApplied | null {
  return t && { ...t, amount: taxInGross(gross, t) };
}

/**
 * The tax a refund of `amount` gives back on a payment of `paid` that held `tax`, after
 * `refundedBefore` was refunded already: its share by the cumulative rule, so the parts add up to
 * the tax held when the whole payment is refunded.
 */
export function taxRefunded(paid: number, tax: number, refundedBefore: number, amount: number): number {
  if (tax === 0 || paid === 0) return 0;
  return bookedAmount({ amount: tax, per: paid }, refundedBefore, refundedBefore + amount);
}
