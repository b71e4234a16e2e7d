// The seed price list, from the two model tables of the service specification.
export interface SeedModel {
  id: string;
  alias: string | null;
  multiplier: number;
}

export const SEED_MODELS: readonly SeedModel[] = [
  { id: 'cx/gen-6-astra', alias: 'gen-6-astra', multiplier: 2 },
  { id: 'cx/gen-6-luna', alias: 'gen-6-luna', multiplier: 1 },
  { id: 'cx/gen-6-terra', alias: 'gen-6-terra', multiplier: 1.25 },
  { id: 'cx/gen-6-sol', alias: 'gen-6-sol', multiplier: 1.5 },
  { id: 'alpha-fable-5.1', alias: null, multiplier: 2 },
  { id: 'alpha-opus-5', alias: null, multiplier: 1.75 },
  { id: 'alpha-opus-4.8', alias: null, multiplier: 1.75 },
  { id: 'alpha-opus-4.7', alias: null, multiplier: 1.75 },
  { id: 'alpha-opus-4.6', alias: null, multiplier: 1.75 },
  { id: 'alpha-sonnet-5', alias: null, multiplier: 1.5 },
  { id: 'alpha-haiku-4.5', alias: null, multiplier: 1 },
];

export const REASONING_EFFORTS = ['low', 'medium', 'high', 'xhigh', 'max'] as const;
