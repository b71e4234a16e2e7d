// chat / chatStream through the official AzureOpenAI client: the canonical call goes out as a
// chat completion (the body the OpenAI adapter sends, so one rule builds it), to the deployment
// in the client's URL; replies and usage are read by the OpenAI adapter's own mapping. Azure's
// extra fields (prompt_filter_results, content_filter_results) ride along and are not needed.
import type { AzureOpenAI } from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsNonStreaming, ChatCompletionCreateParamsStreaming } from 'openai/resources/chat/completions';
import { abortedWith } from '../abort.ts';
import { UpstreamError, type ChatCall, type ChatOutcome, type ChatStreamPart, type Usage } from '../port.ts';
import { asUpstreamFailure, Deadline } from '../upstream-http.ts';
import { chatOutcomeOf, chatRequestBody, finishReasonOf, requestTexts } from '../openai-chat-wire.ts';
import { chatUsageOf } from '../openai/usage.ts';
import { azureFailureOf, networkCause } from './errors.ts';

// Azure's reasoning deployments take only max_completion_tokens; the others accept it too.
const MAX_TOKENS_FIELD = 'max_completion_tokens';

/** The client and the waits of one Azure OpenAI provider. */
export interface AzureTarget {
  client: AzureOpenAI;
  apiKey: string;
  /** Longest silence between stream events. */
  timeoutMs: number;
  /** Longest wait from sending the request to the response's headers. */
  firstByteTimeoutMs: number;
}

/**
 * The call's own abort, fired by the caller leaving or by the upstream's silence (the deadline):
 * the client is given its signal, and `failure` tells the two apart.
 */
function watched(target: AzureTarget, call: ChatCall, op: string) {
  const deadline = new Deadline(call.signal, target.firstByteTimeoutMs);
  const abort = abortedWith(call.signal);
  deadline.watch(() => abort.abort());
  const secrets = [target.apiKey, ...requestTexts(call)];
  // A caller's abort stays an abort and the deadline's is a timeout, whatever the client made of them.
  const failure = (error: unknown): Error =>
    call.signal.aborted || deadline.timedOut
      ? asUpstreamFailure(error, op, call.signal, deadline)
      : (azureFailureOf(error, op, secrets) ?? asUpstreamFailure(networkCause(error), op, call.signal, deadline));
  return { deadline, signal: abort.signal, failure };
}

export async function chat(target: AzureTarget, call: ChatCall): Promise<ChatOutcome> {
  const op = 'chat';
  const { deadline, signal, failure } = watched(target, call, op);
  let json: unknown;
  try {
    const body = chatRequestBody(call, false, MAX_TOKENS_FIELD) as unknown as ChatCompletionCreateParamsNonStreaming;
    json = await target.client.chat.completions.create(body, { signal });
  } catch (error) {
    throw failure(error);
  } finally {
    deadline.clear();
  }
  // Usage first: a reply without it is refused before anything is made of it.
  const usage = chatUsageOf((json as { usage?: unknown }).usage, op);
  const outcome: ChatOutcome = { ...chatOutcomeOf(json, call), usage };
  const id = (json as { id?: unknown }).id;
  if (typeof id === 'string' && id !== '') outcome.upstreamId = id;
  return outcome;
}

export async function* chatStream(target: AzureTarget, call: ChatCall): AsyncGenerator<ChatStreamPart> {
  const op = 'chat stream';
  const { deadline, signal, failure } = watched(target, call, op);
  const toolIndexes = new Set<number>();
  let rawFinish: unknown;
  let usage: Usage | undefined;
  let upstreamId: string | undefined;
  try {
    // chatRequestBody asks for stream_options.include_usage when streaming.
    const body = chatRequestBody(call, true, MAX_TOKENS_FIELD) as unknown as ChatCompletionCreateParamsStreaming;
    const stream = await target.client.chat.completions.create(body, { signal });
    deadline.touch(target.timeoutMs);
    for await (const chunk of stream as AsyncIterable<ChatCompletionChunk>) {
      // The silence timer must not run while a slow client is consuming what we yield.
      deadline.clear();
      // Azure's first chunk names no response (id ""): it only carries prompt_filter_results.
      if (upstreamId === undefined && chunk.id) upstreamId = chunk.id;
      if (chunk.usage != null) usage = chatUsageOf(chunk.usage, op);
      const choice = chunk.choices?.[0];
      if (choice) {
        const delta = choice.delta ?? {};
        if (typeof delta.content === 'string' && delta.content !== '') yield { type: 'text', text: delta.content };
        for (const tool of delta.tool_calls ?? []) {
          const part: Extract<ChatStreamPart, { type: 'tool_call' }> = { type: 'tool_call', index: tool.index ?? 0 };
          if (tool.id) part.id = tool.id;
          if (tool.function?.name) part.name = tool.function.name;
          if (typeof tool.function?.arguments === 'string') part.arguments = tool.function.arguments;
          toolIndexes.add(part.index);
          yield part;
        }
        if (choice.finish_reason != null) rawFinish = choice.finish_reason;
      }
      deadline.touch(target.timeoutMs);
    }
  } catch (error) {
    throw failure(error);
  } finally {
    deadline.clear();
  }
  // The usage chunk is the last one: a stream that ends without it was cut (or never asked).
  if (!usage) throw new UpstreamError(`upstream ${op} ended without usage`);
  const finish: ChatStreamPart = { type: 'finish', finishReason: finishReasonOf(rawFinish, toolIndexes.size > 0), usage };
  if (upstreamId !== undefined) finish.upstreamId = upstreamId;
  yield finish;
}
