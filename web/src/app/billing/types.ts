// The session API's billing answers as the page reads them (src/books/payments-routes.ts shapes them).
export interface PlanPrice {
  plan_id: string;
  name: string;
  amount: number;
  currency: string;
  display: string;
}

export interface PackPrice {
  pack_id: string;
  name: string;
  tokens: number;
  amount: number;
  currency: string;
  display: string;
}

export interface PriceList {
  currency: string;
  plans: PlanPrice[];
  packs: PackPrice[];
}

export interface Payment {
  id: string;
  processor: string;
  amount: number;
  currency: string;
  display: string;
  received_at: string;
  item: { kind: 'plan'; plan_id: string; tokens: number } | { kind: 'pack'; pack_id: string; tokens: number };
  refunded: number;
  tokens_withdrawn: number;
}

export interface CheckoutSession {
  id: string;
  url: string;
  amount: number;
  currency: string;
}
