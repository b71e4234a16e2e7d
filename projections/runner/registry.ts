// The read models the runner feeds. The runner is base and knows no feature, so the wiring
// hands it the list (projections/read-models.ts) before anything projects or rebuilds.
import type { RowProjection } from './row-projection.ts';

let registered: RowProjection[] | null = null;

/** Called once by projections/read-models.ts; a second, different list is a wiring mistake. */
export function registerReadModels(projections: RowProjection[]): void {
  if (registered && registered !== projections) throw new Error('the read models are registered twice, with different lists');
  registered = projections;
}

/** Every read model, in the order their tables are made. */
export function allReadModels(): RowProjection[] {
  if (!registered) throw new Error('no read models registered: the wiring imports projections/read-models.ts first');
  return registered;
}
