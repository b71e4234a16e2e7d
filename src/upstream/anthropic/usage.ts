// Anthropic usage as the gateway meters it.
//
// Anthropic's `input_tokens` does NOT include the cached prompt: the whole prompt is
// input + cache_creation_input_tokens + cache_read_input_tokens. `output_tokens` includes any
// thinking, which Anthropic does not report separately (so reasoning_tokens stays unset).
import { UpstreamError, type Usage } from '../port.ts';
import { isObject, tokenCount, type Json } from './json.ts';

const FIELDS = ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'] as const;

/** Maps a raw `usage` object; a missing or non-integer field counts 0, a missing usage is an error. */
export function usageOf(raw: unknown, op: string): Usage {
  if (!isObject(raw)) throw new UpstreamError(`upstream ${op} reply carried no usage`);
  const n = (field: (typeof FIELDS)[number]) => tokenCount(raw[field]) ?? 0;
  const written = n('cache_creation_input_tokens');
  const read = n('cache_read_input_tokens');
  // The split by lifetime (priced apart upstream): never more than the writes it splits.
  const split = isObject(raw.cache_creation) ? tokenCount(raw.cache_creation.ephemeral_1h_input_tokens) : undefined;
  return {
    prompt_tokens: n('input_tokens') + written + read,
    completion_tokens: n('output_tokens'),
    cached_tokens: read,
    cache_write_tokens: written,
    ...(split ? { cache_write_1h_tokens: Math.min(split, written) } : {}),
  };
}

/**
 * Usage over a stream: message_start.message.usage first, then every message_delta.usage.
 * Anthropic's counts are CUMULATIVE (each event repeats the running total), so the latest value
 * of each field wins; nothing is ever added up.
 */
export class UsageTracker {
  private latest: Json | undefined;

  merge(raw: unknown): void {
    if (!isObject(raw)) return;
    const next: Json = { ...this.latest };
    for (const field of FIELDS) {
      if (typeof raw[field] === 'number') next[field] = raw[field];
    }
    if (isObject(raw.cache_creation)) next.cache_creation = raw.cache_creation;
    this.latest = next;
  }

  get seen(): boolean {
    return this.latest !== undefined;
  }

  /** The usage so far; throws when the stream never reported any. */
  usage(op: string): Usage {
    return usageOf(this.latest, op);
  }
}
