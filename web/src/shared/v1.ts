// The /v1 API as the /app pages use it, with the saved key: typed answers for the calls they make.
import { createClient, gatewayRoot } from './http.ts';
import { ApiProblem } from './problem.ts';
import { getKey } from './storage.ts';

/** A grant of extra tokens with terms (an expiry, a priority, a scope of models), as /v1/subscription lists it. */
export interface Credit {
  granted: number;
  used: number;
  remaining: number;
  expires_at: string | null;
  /** 1 to 100: lower numbers are drawn first. */
  priority: number;
  /** The models it pays for; null: every model. */
  models: string[] | null;
  status: 'active' | 'expired';
}

export interface Subscription {
  status: 'active' | 'expired' | string;
  plan: { id: string; name: string } | null;
  quota: { total: number; used: number; reserved: number; remaining: number };
  /** `credits`: the grants with terms, the open ones in draw-down order, then those expired (the others never expire). */
  extra_tokens: { granted: number; used: number; remaining: number; credits: Credit[] };
  remaining_tokens: number;
  starts_at: string | null;
  expires_at: string | null;
  rate_limit: { requests_per_minute: number | null };
}

export interface ModelUsage {
  model: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  images: number;
  billed: number;
}

export interface DayUsage {
  date: string;
  requests: number;
  tokens: number;
  images: number;
  billed: number;
  models: Array<{ model: string; billed: number }>;
}

export interface Usage {
  account_id: string;
  range: { start: string; end: string; days: number };
  totals: { requests: number; prompt_tokens: number; completion_tokens: number; tokens: number; images: number; billed: number };
  models: ModelUsage[];
  daily?: DayUsage[];
}

export const v1 = createClient(
  `${gatewayRoot('/app/')}/v1/`,
  getKey,
  () => new ApiProblem(401, { message: 'No API key entered yet.', type: 'invalid_request_error', code: 'missing_api_key' }),
);
