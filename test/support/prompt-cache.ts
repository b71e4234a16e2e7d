// How the doubles whose caching is explicit (Anthropic's cache_control, Bedrock's cache points)
// count a prompt: its parts in order, each with its tokens, the parts that end a cached prefix
// marked with the prefix's lifetime. A prefix seen before (same model, same parts) is read from
// the cache; the prefixes after the longest one read are written.
import { prefixKeys } from './double-http.ts';

export interface PromptSegment {
  value: unknown;
  tokens: number;
  /** Set when this part ends a cached prefix. */
  ttl?: '5m' | '1h';
}

/** All the prompt's tokens, cached or not. */
export const promptTokens = (segments: readonly PromptSegment[]): number => segments.reduce((sum, s) => sum + s.tokens, 0);

/** The tokens of the prefix ending at each cache mark, in order. */
export function cachePrefixTokens(segments: readonly PromptSegment[]): number[] {
  const out: number[] = [];
  let sum = 0;
  for (const s of segments) {
    sum += s.tokens;
    if (s.ttl) out.push(sum);
  }
  return out;
}

export interface CacheUsage {
  /** Tokens neither read from nor written to the cache. */
  uncached: number;
  read: number;
  written: { '5m': number; '1h': number };
}

/** The prompt's cache reads and writes against `cache`, which then holds every marked prefix. */
export function promptCacheUsage(cache: Set<string>, model: string, segments: readonly PromptSegment[]): CacheUsage {
  const keys = prefixKeys(
    model,
    segments.map((s) => s.value),
  );
  const marks: { key: string; tokens: number; ttl: '5m' | '1h' }[] = [];
  let total = 0;
  segments.forEach((s, i) => {
    total += s.tokens;
    if (s.ttl) marks.push({ key: keys[i]!, tokens: total, ttl: s.ttl });
  });
  let hit = -1;
  marks.forEach((m, i) => {
    if (cache.has(m.key)) hit = i;
  });
  const read = hit >= 0 ? marks[hit]!.tokens : 0;
  const written = { '5m': 0, '1h': 0 };
  let covered = read;
  for (const m of marks.slice(hit + 1)) {
    written[m.ttl] += m.tokens - covered;
    covered = m.tokens;
  }
  for (const m of marks) cache.add(m.key);
  return { uncached: total - covered, read, written };
}
