// chat / chatStream through the official @google/genai client: the canonical call goes out as
// generateContent (or streamGenerateContent over SSE); text, function calls, the finish reason
// and usageMetadata come back as the port's outcome and stream parts.
import type { GenerateContentResponse, GoogleGenAI } from '@google/genai';
import { abortedWith } from '../abort.ts';
import { UpstreamError, type ChatCall, type ChatOutcome, type ChatStreamPart, type ToolCall, type Usage } from '../port.ts';
import { asUpstreamFailure, Deadline } from '../upstream-http.ts';
import { chatSecrets } from '../openai-chat-wire.ts';
import { answerParts, blockedPrompt, finishReasonOf, generateRequest, toolCallOf } from './translate.ts';
import { usageOf } from './usage.ts';
import { geminiFailureOf, networkCause } from './errors.ts';

/** The client and the waits of one Gemini provider. */
export interface GeminiTarget {
  client: GoogleGenAI;
  /** The API key (or access token) to scrub from error messages. */
  secret: string;
  /** Longest silence between stream events. */
  timeoutMs: number;
  /** Longest wait from sending the request to the response's headers. */
  firstByteTimeoutMs: number;
  /** Embed one text a request (Vertex AI, whose newer embedding models take no more). */
  embedOneByOne?: boolean;
}

/**
 * The call's own abort, fired by the caller leaving or by the upstream's silence (the deadline):
 * the client is given its signal, and `failure` tells the two apart.
 */
export function watched(target: GeminiTarget, signal: AbortSignal, op: string, texts: readonly string[]) {
  const deadline = new Deadline(signal, target.firstByteTimeoutMs);
  const abort = abortedWith(signal);
  deadline.watch(() => abort.abort());
  const secrets = [target.secret, ...texts];
  const failure = (error: unknown): Error =>
    signal.aborted || deadline.timedOut
      ? asUpstreamFailure(error, op, signal, deadline)
      : (geminiFailureOf(error, op, secrets) ?? asUpstreamFailure(networkCause(error), op, signal, deadline));
  return { deadline, signal: abort.signal, failure };
}

export async function chat(target: GeminiTarget, call: ChatCall): Promise<ChatOutcome> {
  const op = 'chat';
  const { deadline, signal, failure } = watched(target, call.signal, op, chatSecrets(call));
  let response: GenerateContentResponse;
  try {
    response = await target.client.models.generateContent({ model: call.upstreamModel, ...generateRequest(call, signal) });
  } catch (error) {
    throw failure(error);
  } finally {
    deadline.clear();
  }
  const blocked = blockedPrompt(response, op);
  if (blocked) throw blocked;
  // Usage first: a reply without it is refused before anything is made of it.
  const usage = usageOf(response.usageMetadata, op);
  let content = '';
  const toolCalls: ToolCall[] = [];
  for (const part of answerParts(response)) {
    if (typeof part.text === 'string') content += part.text;
    const toolCall = toolCallOf(part);
    if (toolCall) toolCalls.push(toolCall);
  }
  const outcome: ChatOutcome = { content, toolCalls, finishReason: finishReasonOf(response.candidates?.[0]?.finishReason, toolCalls.length > 0), usage };
  if (response.responseId) outcome.upstreamId = response.responseId;
  return outcome;
}

export async function* chatStream(target: GeminiTarget, call: ChatCall): AsyncGenerator<ChatStreamPart> {
  const op = 'chat stream';
  const { deadline, signal, failure } = watched(target, call.signal, op, chatSecrets(call));
  let toolIndex = 0;
  let rawFinish: unknown;
  let usage: Usage | undefined;
  let upstreamId: string | undefined;
  try {
    const stream = await target.client.models.generateContentStream({ model: call.upstreamModel, ...generateRequest(call, signal) });
    deadline.touch(target.timeoutMs);
    for await (const chunk of stream) {
      // The silence timer must not run while a slow client is consuming what we yield.
      deadline.clear();
      const blocked = blockedPrompt(chunk, op);
      if (blocked) throw blocked;
      upstreamId ??= chunk.responseId || undefined;
      // Every chunk repeats the running usage: the latest wins, nothing is added up.
      if (chunk.usageMetadata) usage = usageOf(chunk.usageMetadata, op);
      for (const part of answerParts(chunk)) {
        if (typeof part.text === 'string' && part.text !== '') yield { type: 'text', text: part.text };
        const toolCall = toolCallOf(part);
        if (toolCall) yield { type: 'tool_call', index: toolIndex++, id: toolCall.id, name: toolCall.function.name, arguments: toolCall.function.arguments };
      }
      rawFinish = chunk.candidates?.[0]?.finishReason ?? rawFinish;
      deadline.touch(target.timeoutMs);
    }
  } catch (error) {
    throw failure(error);
  } finally {
    deadline.clear();
  }
  // The last chunk names the finish reason: a stream that ends without one was cut.
  if (rawFinish === undefined) throw new UpstreamError(`upstream ${op} ended before its finish reason`);
  if (!usage) throw new UpstreamError(`upstream ${op} ended without usage`);
  const finish: ChatStreamPart = { type: 'finish', finishReason: finishReasonOf(rawFinish, toolIndex > 0), usage };
  if (upstreamId !== undefined) finish.upstreamId = upstreamId;
  yield finish;
}
