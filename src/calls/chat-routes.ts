// POST /v1/chat/completions: the OpenAI dialect over the shared metered chat call (chat-call.ts).
import { randomUUID } from 'node:crypto';
import type { Context } from 'koa';
import type { CallDeps } from './call-deps.ts';
import type { SseWriter } from '../http/sse.ts';
import { validateBody } from '../http/validate.ts';
import type { ChatMessage, Usage } from '../upstream/port.ts';
import { withBilledTokens } from './billed-usage.ts';
import { chatCall, sendChatStream } from './metered-chat-routes.ts';
import type { ChatCompletionsRequest } from './shapes/request-shapes.ts';
import { timelineOf } from '../http/call-timeline.ts';

/** The body as its schema declares it (src/calls/shapes/request-shapes.ts); the rest is passed through. */
type ChatBody = ChatCompletionsRequest & { [param: string]: unknown };

type RequestMessage = ChatCompletionsRequest['messages'][number];
const hasContent = (m: RequestMessage): m is RequestMessage & { content: NonNullable<RequestMessage['content']> | null } => m.content !== undefined;

/**
 * The messages as the canonical call takes them. A message may leave out its content (an
 * assistant's tool calls), which the canonical call says as null; the usual body has it on every
 * message and is passed on as it is (copying every call's messages cost +0.13 to +0.22 ms of c=1 added latency on
 * bench/one-truth.ts).
 */
function canonicalMessages(messages: RequestMessage[]): ChatMessage[] {
  return messages.every(hasContent) ? messages : messages.map((m) => ({ ...m, content: m.content ?? null }));
}

/** Identifies the gateway build serving the reply (clients may log it). */
const FINGERPRINT = 'fp_tollgate_1';

/** Common parameters handed to the upstream as they are. */
const PASSTHROUGH = [
  'temperature',
  'top_p',
  'presence_penalty',
  'frequency_penalty',
  'seed',
  'stop',
  'user',
  'response_format',
  'logit_bias',
  'parallel_tool_calls',
];

export function chatCompletions(deps: CallDeps) {
  return async (ctx: Context) => {
    const body = await validateBody<ChatBody>('chat-completions', ctx.request.body);
    timelineOf(ctx).mark('validate');
    const params: Record<string, unknown> = {};
    for (const p of PASSTHROUGH) if (body[p] !== undefined && body[p] !== null) params[p] = body[p];
    const id = `chatcmpl-${randomUUID().replace(/-/g, '')}`;
    const created = Math.floor(Date.now() / 1000);
    const result = await chatCall(deps, ctx, {
      api: 'chat.completions',
      model: body.model,
      messages: canonicalMessages(body.messages),
      tools: body.tools,
      toolChoice: body.tool_choice,
      maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
      reasoningEffort: body.reasoning_effort,
      params,
      stream: !!body.stream,
      body,
    });
    const model = result.model.id;

    if (!result.stream) {
      const { reply, billing } = result;
      if ('native' in reply) {
        ctx.body = reply.native.body;
        timelineOf(ctx).mark('reply');
        return;
      }
      const outcome = reply.canonical;
      ctx.body = withBilledTokens(
        {
          id,
          object: 'chat.completion',
          created,
          model,
          system_fingerprint: FINGERPRINT,
          choices: [
            {
              index: 0,
              finish_reason: outcome.finishReason,
              logprobs: null,
              message: {
                role: 'assistant',
                content: outcome.toolCalls.length && !outcome.content ? null : outcome.content,
                refusal: null,
                ...(outcome.toolCalls.length ? { tool_calls: outcome.toolCalls } : {}),
              },
            },
          ],
          usage: usageBody(outcome.usage),
        },
        billing.billed,
      );
      timelineOf(ctx).mark('reply');
      return;
    }

    const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      system_fingerprint: FINGERPRINT,
      choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
    });
    const streamError = (sse: SseWriter, message: string) => sse.data({ error: { message, type: 'upstream_error', param: null, code: 'upstream_error' } });
    await sendChatStream(deps, ctx, result, {
      renderer: (sse) => {
        sse.data(chunk({ role: 'assistant', content: '' }, null));
        return {
          text: (text) => sse.data(chunk({ content: text }, null)),
          toolCall: (part) =>
            sse.data(
              chunk(
                {
                  tool_calls: [
                    {
                      index: part.index,
                      ...(part.id ? { id: part.id, type: 'function' } : {}),
                      function: { ...(part.name ? { name: part.name } : {}), arguments: part.arguments ?? '' },
                    },
                  ],
                },
                null,
              ),
            ),
          finish: (reason, usage, billing) => {
            // What the call cost: in the usage chunk when the caller asked for one, else as a
            // top-level billed_tokens on the final chunk (see billed-usage.ts).
            const wantsUsage = !!body.stream_options?.include_usage;
            sse.data(wantsUsage ? chunk({}, reason) : { ...chunk({}, reason), billed_tokens: billing.billed });
            if (wantsUsage)
              sse.data({
                id,
                object: 'chat.completion.chunk',
                created,
                model,
                system_fingerprint: FINGERPRINT,
                choices: [],
                usage: { ...usageBody(usage), billed_tokens: billing.billed },
              });
            sse.data('[DONE]');
          },
          error: (message) => streamError(sse, message),
        };
      },
      nativeError: streamError,
    });
  };
}

export function usageBody(u: Usage) {
  return {
    prompt_tokens: u.prompt_tokens,
    completion_tokens: u.completion_tokens,
    total_tokens: u.prompt_tokens + u.completion_tokens,
    prompt_tokens_details: { cached_tokens: u.cached_tokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: u.reasoning_tokens ?? 0 },
  };
}
