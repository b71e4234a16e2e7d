// The values upstream cost events carry (UpstreamCostRateSet, UpstreamBillImported in events.ts).
/** Prices of one upstream model on one channel: decimal major units per million tokens. */
export interface CostPrices {
  input: string;
  cacheRead: string;
  cacheWrite5m: string;
  cacheWrite1h: string;
  output: string;
  image: string | null;
}

/** One line of an imported bill: a UTC day and upstream model, the cost in minor units and the tokens it names. */
export interface UpstreamBillLine {
  day: string;
  upstreamModel: string;
  costMinor: number;
  inputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
}
