// The catalogue feature as the other features see it: what they may import, and nothing else.

export { callChannels, upstreamCostBetween, upstreamCostPerRowSql, type UpstreamCostRow } from '../../projections/catalogue/upstream-cost.ts';
export { upstreamCostDayChanges } from '../../projections/catalogue/cost-tables.ts';
export { UNRECORDED } from '../../projections/catalogue/upstream-report.ts';
export { modelCommand, priceModel, seedModels, setChannelEnabled } from './commands.ts';
export { type CatalogModel, type ModelCatalog } from './model-catalog.ts';
export { modelDecider, type CorrectionWindow, type ModelCommand, type ModelState } from './model-decider.ts';
export { type Route } from './models-config.ts';
export { REASONING_EFFORTS } from './seed-models.ts';
export { buildUpstreamReport, upstreamReportCsv, upstreamReportQuery } from './upstream-report.ts';
export type { CatalogueDeps } from './catalogue-deps.ts';
export { reconcileBills } from './cost-reconciliation.ts';
