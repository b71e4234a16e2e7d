// Small JSON helpers shared by the OpenAI adapter's modules.
import { UpstreamError } from '../port.ts';

export type Json = Record<string, unknown>;

export const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A token count: a non-negative integer, else undefined. */
export const tokenCount = (value: unknown): number | undefined => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined);

/** Parses one SSE data line that must be a JSON object; anything else is the upstream's fault. */
export function parseEventData(data: string, op: string): Json {
  try {
    const json: unknown = JSON.parse(data);
    if (isObject(json)) return json;
  } catch {
    // fall through
  }
  throw new UpstreamError(`upstream ${op} sent a malformed event`);
}
