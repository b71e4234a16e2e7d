// The counters both usage read models keep (per account and day, by model in usage-daily.ts and
// by key in usage-keys.ts): one fold of a charge or an adjustment into them.
import type { ProjectedEvent } from '../../src/eventstore/port.ts';
import { eventData } from '../runner/row-projection.ts';

export interface UsageCounts {
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  images: number;
  billed: number;
  adjustment: number;
}

export const noUsage = (): UsageCounts => ({ requests: 0, prompt_tokens: 0, completion_tokens: 0, images: 0, billed: 0, adjustment: 0 });

/** `r` with a ChatCharged, ImageCharged or ChargeAdjusted counted in. */
export function countCharge<R extends UsageCounts>(r: R, e: ProjectedEvent): R {
  if (e.type === 'ChargeAdjusted') return { ...r, adjustment: r.adjustment + eventData<'ChargeAdjusted'>(e).delta };
  if (e.type === 'ChatCharged') {
    const d = eventData<'ChatCharged'>(e);
    return {
      ...r,
      requests: r.requests + 1,
      prompt_tokens: r.prompt_tokens + d.promptTokens,
      completion_tokens: r.completion_tokens + d.completionTokens,
      billed: r.billed + d.billed,
    };
  }
  const d = eventData<'ImageCharged'>(e);
  return { ...r, requests: r.requests + 1, images: r.images + d.images, billed: r.billed + d.billed };
}
