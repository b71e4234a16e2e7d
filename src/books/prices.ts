// The price list decider (one stream): the ledger's settlement currency, set once, each plan's
// price per period and the token packs for sale. Each price is an event with its actor and applies
// to purchases from then on; a payment records what it paid, so old purchases keep their price.
// An item priced in the settlement currency may also be offered in other currencies, each at a
// price of its own (a payment in one is booked at the day's exchange rate: src/books/exchange-rates.ts).
import type { Decider } from '../ledger/decider.ts';
import { definedOnly, type StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid, requireTokenAmount } from '../ledger/errors.ts';
import { currencyOf, requireMinorUnits } from '../money/money.ts';

/** A price in a currency other than the settlement currency. */
export interface OfferedPrice {
  amount: number;
  active: boolean;
}

export interface PlanPrice {
  amount: number;
  currency: string;
  active: boolean;
  /** Its prices in the other currencies it is offered in, by currency. */
  offered?: Record<string, OfferedPrice>;
}

export interface TokenPack {
  name: string;
  tokens: number;
  amount: number;
  currency: string;
  active: boolean;
  /** The credit it grants (absent: tokens that never expire, priority 50, every model). */
  expiresInDays?: number;
  priority?: number;
  models?: string[];
  /** Its prices in the other currencies it is offered in, by currency. */
  offered?: Record<string, OfferedPrice>;
}

export interface PriceListState {
  currency: string | null;
  plans: Record<string, PlanPrice>;
  packs: Record<string, TokenPack>;
}

export type PriceListCommand =
  | { type: 'SetCurrency'; currency: string }
  | { type: 'PricePlan'; planId: string; amount: number; currency?: string; active?: boolean }
  | {
      type: 'PricePack';
      packId: string;
      name: string;
      tokens: number;
      amount: number;
      currency?: string;
      active?: boolean;
      /** The terms of the credit it grants (src/accounts/credits.ts), checked where the request is read. */
      credit?: PackCredit;
    };

/** A pack's credit terms: days after a purchase that its unused tokens expire, priority, models. */
export interface PackCredit {
  expiresInDays?: number;
  priority?: number;
  models?: string[];
}

/** The price's currency: the ledger's own by default, or another it offers the item in (once it has a price in its own). */
function priceCurrency(s: PriceListState, given: string | undefined, pricedAlready: boolean, what: string): string {
  if (!s.currency) throw new DomainError('conflict', 'the settlement currency is not set yet');
  const currency = given === undefined ? s.currency : currencyOf(given).code;
  if (currency !== s.currency && !pricedAlready)
    throw new DomainError('conflict', `${what} needs a price in the settlement currency, ${s.currency}, before one in ${currency}`, { param: 'currency' });
  return currency;
}

/** An item's price in `currency`: the settlement price, or an offered one (null: not offered, or not on sale). */
export function priceIn(s: PriceListState, item: PlanPrice | TokenPack | undefined, currency: string): { amount: number; currency: string } | null {
  if (!item) return null;
  if (currency === item.currency) return item.active ? { amount: item.amount, currency } : null;
  const offered = item.offered?.[currency];
  return offered?.active ? { amount: offered.amount, currency } : null;
}

/** A price event's part of the state: the settlement price replaces the item's terms, another currency's adds an offer. */
function withPrice<T extends PlanPrice | TokenPack>(s: PriceListState, before: T | undefined, next: T): T {
  if (next.currency === s.currency || !before) return { ...next, ...(before?.offered ? { offered: before.offered } : {}) };
  return { ...before, offered: { ...before.offered, [next.currency]: { amount: next.amount, active: next.active } } };
}

export const priceListDecider: Decider<PriceListState, PriceListCommand, StreamEvents['priceList']> = {
  initialState: () => ({ currency: null, plans: {}, packs: {} }),
  decide(c, s) {
    switch (c.type) {
      case 'SetCurrency': {
        const currency = currencyOf(c.currency).code;
        if (s.currency === currency) return [];
        if (s.currency) throw new DomainError('conflict', `the settlement currency is ${s.currency} and is set once; it cannot become ${currency}`);
        return [{ type: 'SettlementCurrencySet', data: { currency } }];
      }
      case 'PricePlan': {
        const currency = priceCurrency(s, c.currency, !!s.plans[c.planId], `plan ${c.planId}`);
        const amount = requireMinorUnits(c.amount, 'amount', { allowZero: true });
        return [{ type: 'PlanPriced', data: { planId: c.planId, amount, currency, active: c.active ?? true } }];
      }
      case 'PricePack': {
        const pack = s.packs[c.packId];
        const currency = priceCurrency(s, c.currency, !!pack, `pack ${c.packId}`);
        const amount = requireMinorUnits(c.amount, 'amount', { allowZero: true });
        requireTokenAmount(c.tokens, 'tokens');
        // A pack is one thing in every currency: another currency's price keeps its size and terms.
        if (currency !== s.currency) {
          if (c.tokens !== pack.tokens) throw invalid(`pack ${c.packId} has ${pack.tokens} tokens in every currency`, { param: 'tokens' });
          const { offered: _o, amount: _a, currency: _c, active: _x, ...terms } = pack;
          return [{ type: 'TokenPackPriced', data: { packId: c.packId, ...terms, amount, currency, active: c.active ?? true } }];
        }
        if (typeof c.name !== 'string' || !c.name || c.name.length > 200) throw invalid('name must be 1-200 characters', { param: 'name' });
        return [
          {
            type: 'TokenPackPriced',
            data: { packId: c.packId, name: c.name, tokens: c.tokens, amount, currency, active: c.active ?? true, ...definedOnly({ ...c.credit }) },
          },
        ];
      }
    }
  },
  evolve(s, e) {
    switch (e.type) {
      case 'SettlementCurrencySet':
        return { ...s, currency: e.data.currency };
      case 'PlanPriced': {
        const { planId, ...price } = e.data;
        return { ...s, plans: { ...s.plans, [planId]: withPrice(s, s.plans[planId], price) } };
      }
      case 'TokenPackPriced': {
        const { packId, ...pack } = e.data;
        return { ...s, packs: { ...s.packs, [packId]: withPrice(s, s.packs[packId], pack) } };
      }
      default:
        return s;
    }
  },
};
