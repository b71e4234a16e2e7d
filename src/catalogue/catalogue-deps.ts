import type { RouteDeps } from '../http/route-deps.ts';
import type { ModelCatalog } from './model-catalog.ts';

/** What the catalogue's routes are given: the models and their prices as this process holds them. */
export interface CatalogueDeps extends RouteDeps {
  catalog: ModelCatalog;
  /** The currency money is settled in (the price list's; null before any price is set). */
  settlementCurrency(): Promise<string | null>;
  /** A closed month of the books that ends after `at`, if any: a cost rate may not re-price its calls (src/books/periods.ts). */
  closedMonthEndingAfter(at: string): Promise<string | null>;
}
