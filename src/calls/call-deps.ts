import type { RouteDeps } from '../http/route-deps.ts';
import type { ModelCatalog } from '../catalogue/index.ts';
import type { Metering } from './metering.ts';

/** What a metered call and the key holder's reads are given. */
export interface CallDeps extends RouteDeps {
  catalog: ModelCatalog;
  metering: Metering;
}
