import type { CatalogueDeps } from '../catalogue/index.ts';
import type { CustomerDeps } from '../customers/index.ts';

/** Everything a route may need, built once at start-up: what each feature's routes ask for, together. */
export interface GatewayDeps extends CatalogueDeps, CustomerDeps {}
