// OpenAI usage as the gateway meters it.
//
// OpenAI's prompt/input tokens already include the cached ones, and completion/output tokens
// already include reasoning: the details only say how many of them were which, so nothing is
// added up here. A reply without usage is an error: the gateway never bills on a guess.
import { UpstreamError, type Usage } from '../port.ts';
import { isObject, tokenCount } from './json.ts';

function detail(details: unknown, field: string): number | undefined {
  return isObject(details) ? tokenCount(details[field]) : undefined;
}

function usage(prompt: number, completion: number, cached: number | undefined, reasoning: number | undefined): Usage {
  const out: Usage = { prompt_tokens: prompt, completion_tokens: completion };
  if (cached !== undefined) out.cached_tokens = cached;
  if (reasoning !== undefined) out.reasoning_tokens = reasoning;
  return out;
}

/** Chat completions usage: prompt_tokens (cached included), completion_tokens (reasoning included). */
export function chatUsageOf(raw: unknown, op: string): Usage {
  const prompt = isObject(raw) ? tokenCount(raw.prompt_tokens) : undefined;
  const completion = isObject(raw) ? tokenCount(raw.completion_tokens) : undefined;
  if (!isObject(raw) || prompt === undefined || completion === undefined) throw new UpstreamError(`upstream ${op} reply carried no usage`);
  return usage(prompt, completion, detail(raw.prompt_tokens_details, 'cached_tokens'), detail(raw.completion_tokens_details, 'reasoning_tokens'));
}

/** Responses usage: input_tokens (cached included) → prompt_tokens, output_tokens (reasoning included) → completion_tokens. */
export function responsesUsageOf(raw: unknown, op: string): Usage {
  const input = isObject(raw) ? tokenCount(raw.input_tokens) : undefined;
  const output = isObject(raw) ? tokenCount(raw.output_tokens) : undefined;
  if (!isObject(raw) || input === undefined || output === undefined) throw new UpstreamError(`upstream ${op} reply carried no usage`);
  return usage(input, output, detail(raw.input_tokens_details, 'cached_tokens'), detail(raw.output_tokens_details, 'reasoning_tokens'));
}
