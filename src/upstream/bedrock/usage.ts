// Bedrock's Converse usage as the gateway meters it.
//
// As AWS documents it, `inputTokens` is only the input NOT read from nor written to the prompt
// cache: the whole prompt is inputTokens + cacheReadInputTokens + cacheWriteInputTokens (the same
// rule as Anthropic's own API). `outputTokens` includes any reasoning, which Converse does not
// report apart. A reply without usage is an error: the gateway never bills on a guess.
import type { TokenUsage } from '@aws-sdk/client-bedrock-runtime';
import { UpstreamError, type Usage } from '../port.ts';

const count = (value: unknown): number | undefined => (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined);

export function usageOf(raw: TokenUsage | undefined, op: string): Usage {
  const input = count(raw?.inputTokens);
  const output = count(raw?.outputTokens);
  if (input === undefined || output === undefined) throw new UpstreamError(`upstream ${op} reply carried no usage`);
  const read = count(raw?.cacheReadInputTokens) ?? 0;
  const written = count(raw?.cacheWriteInputTokens) ?? 0;
  return { prompt_tokens: input + read + written, completion_tokens: output, cached_tokens: read, cache_write_tokens: written };
}
