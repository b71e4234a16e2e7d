// POST /v1/chat/completions: the OpenAI dialect over the shared metered chat call (chat-call.ts).
import { randomUUID } from 'node:crypto';
import type { Context } from 'koa';
import type { GatewayDeps } from '../gateway/deps.ts';
import { validateBody } from '../http/validate.ts';
import type { ChatMessage, ToolDefinition, Usage } from '../upstream/port.ts';
import { openSse } from '../gateway/sse.ts';
import { setRemainingHeader } from '../gateway/billing-headers.ts';
import { prepareChat } from '../gateway/chat-call.ts';
import { withBilledTokens } from '../gateway/billed-usage.ts';

interface ChatBody {
  model: string;
  messages: ChatMessage[];
  reasoning_effort?: string;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  tools?: ToolDefinition[];
  tool_choice?: unknown;
  [param: string]: unknown;
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

export function chatCompletions(deps: GatewayDeps) {
  return async (ctx: Context) => {
    const body = await validateBody<ChatBody>('chat-completions', ctx.request.body);
    const params: Record<string, unknown> = {};
    for (const p of PASSTHROUGH) if (body[p] !== undefined && body[p] !== null) params[p] = body[p];
    const prepared = await prepareChat(deps, ctx, {
      api: 'chat.completions',
      model: body.model,
      messages: body.messages,
      tools: body.tools,
      toolChoice: body.tool_choice,
      maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
      reasoningEffort: body.reasoning_effort,
      params,
      stream: !!body.stream,
      body,
    });
    const id = `chatcmpl-${randomUUID().replace(/-/g, '')}`;
    const created = Math.floor(Date.now() / 1000);
    const model = prepared.model.id;

    if (!body.stream) {
      const { reply, billing } = await prepared.complete();
      if ('native' in reply) {
        ctx.body = reply.native.body;
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
      return;
    }

    const stream = await prepared.openStream();
    const sse = openSse(ctx);
    setRemainingHeader(ctx, await deps.metering.remaining(ctx.state.auth.accountId));
    const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      system_fingerprint: FINGERPRINT,
      choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
    });
    const streamError = (message: string) => sse.data({ error: { message, type: 'upstream_error', param: null, code: 'upstream_error' } });
    stream.pipe(sse, {
      renderer: () => {
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
          error: streamError,
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
