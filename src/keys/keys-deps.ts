import type { RouteDeps } from '../http/route-deps.ts';
import type { ModelCatalog } from '../catalogue/index.ts';
import type { KeyDirectory } from './key-directory.ts';

/** What the key routes are given: the models a key may be limited to, and the keys held in memory. */
export interface KeysDeps extends RouteDeps {
  catalog: ModelCatalog;
  keys: KeyDirectory;
}
