// The price list decider (one stream): the ledger's settlement currency, set once, each plan's
// price per period and the token packs for sale. Each price is an event with its actor and applies
// to purchases from then on; a payment records what it paid, so old purchases keep their price.
import type { Decider } from '../ledger/decider.ts';
import { definedOnly, type StreamEvents } from '../ledger/events.ts';
import { DomainError, invalid, requireTokenAmount } from '../ledger/errors.ts';
import { currencyOf, requireMinorUnits } from '../money/money.ts';

export interface PlanPrice {
  amount: number;
  currency: string;
  active: boolean;
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

/** The price's currency: the ledger's own, which it must be set to first (a price in another is refused). */
function settlementCurrency(s: PriceListState, given: string | undefined): string {
  if (!s.currency) throw new DomainError('conflict', 'the settlement currency is not set yet');
  if (given !== undefined && currencyOf(given).code !== s.currency)
    throw invalid(`prices are in the ledger's settlement currency, ${s.currency}`, { param: 'currency' });
  return s.currency;
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
        const currency = settlementCurrency(s, c.currency);
        const amount = requireMinorUnits(c.amount, 'amount', { allowZero: true });
        return [{ type: 'PlanPriced', data: { planId: c.planId, amount, currency, active: c.active ?? true } }];
      }
      case 'PricePack': {
        const currency = settlementCurrency(s, c.currency);
        const amount = requireMinorUnits(c.amount, 'amount', { allowZero: true });
        requireTokenAmount(c.tokens, 'tokens');
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
        return { ...s, plans: { ...s.plans, [planId]: price } };
      }
      case 'TokenPackPriced': {
        const { packId, ...pack } = e.data;
        return { ...s, packs: { ...s.packs, [packId]: pack } };
      }
      default:
        return s;
    }
  },
};
