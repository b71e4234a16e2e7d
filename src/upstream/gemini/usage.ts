// Gemini's usageMetadata as the gateway meters it.
//
// promptTokenCount already includes the cached content (cachedContentTokenCount says how much of
// it); the prompts of Gemini's own tools (toolUsePromptTokenCount) are billed as input on top.
// candidatesTokenCount does NOT include thinking: thoughtsTokenCount is billed as output beside
// it. A reply without a prompt count is an error: the gateway never bills on a guess.
import type { GenerateContentResponseUsageMetadata } from '@google/genai';
import { UpstreamError, type Usage } from '../port.ts';

const count = (value: unknown): number | undefined => (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined);

export function usageOf(raw: GenerateContentResponseUsageMetadata | undefined, op: string): Usage {
  const prompt = count(raw?.promptTokenCount);
  if (!raw || prompt === undefined) throw new UpstreamError(`upstream ${op} reply carried no usage`);
  const thoughts = count(raw.thoughtsTokenCount);
  const cached = count(raw.cachedContentTokenCount);
  const usage: Usage = {
    prompt_tokens: prompt + (count(raw.toolUsePromptTokenCount) ?? 0),
    completion_tokens: (count(raw.candidatesTokenCount) ?? 0) + (thoughts ?? 0),
  };
  if (cached !== undefined) usage.cached_tokens = Math.min(cached, prompt);
  if (thoughts !== undefined) usage.reasoning_tokens = thoughts;
  return usage;
}
