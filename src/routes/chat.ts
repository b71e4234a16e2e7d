// POST /v1/chat/completions: validate, hold, call the upstream, settle; streamed or not.
import { randomUUID } from 'node:crypto';
import type { Context } from 'koa';
import type { GatewayDeps } from '../gateway/deps.ts';
import { validateBody } from '../http/validate.ts';
import { modelNotFound } from '../http/errors.ts';
import { isModelEnabled } from '../ledger/account.ts';
import { countMessageTokens, countTextTokens } from '../upstream/tokenizer.ts';
import type { ChatCall, ChatMessage, ToolDefinition, Usage } from '../upstream/port.ts';
import { openSse } from '../gateway/sse.ts';
import { setBillingHeaders } from '../gateway/billing-headers.ts';
import { isAbortError } from '../upstream/abort.ts';

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
const PASSTHROUGH = ['temperature', 'top_p', 'presence_penalty', 'frequency_penalty', 'seed', 'stop', 'user', 'response_format', 'logit_bias', 'parallel_tool_calls'];

export function chatCompletions(deps: GatewayDeps) {
  return async (ctx: Context) => {
    const body = validateBody<ChatBody>('chat-completions', ctx.request.body);
    const model = deps.catalog.resolve(body.model);
    // A model outside the caller's plan reads exactly like an unknown one.
    if (!model || !isModelEnabled(await deps.metering.state(ctx.state.auth.accountId), model.id)) throw modelNotFound(body.model, deps.baseUrl(ctx));
    ctx.state.model = model.id;
    const caller = { keyId: ctx.state.auth.keyId, accountId: ctx.state.auth.accountId, requestId: ctx.state.requestId };
    const promptTokens = countMessageTokens(body.messages, body.tools);
    const hold = await deps.metering.reserveChat(caller, model.id, model.multiplierMilli, promptTokens, body.max_completion_tokens ?? body.max_tokens ?? undefined);

    const abort = new AbortController();
    const params: Record<string, unknown> = {};
    for (const p of PASSTHROUGH) if (body[p] !== undefined && body[p] !== null) params[p] = body[p];
    const call: ChatCall = {
      upstreamModel: model.route.upstreamModel, messages: body.messages, maxTokens: hold.maxCompletionTokens,
      reasoningEffort: body.reasoning_effort, tools: body.tools, toolChoice: body.tool_choice, params, signal: abort.signal,
    };
    const id = `chatcmpl-${randomUUID().replace(/-/g, '')}`;
    const created = Math.floor(Date.now() / 1000);
    const effort = body.reasoning_effort ?? null;
    const settle = (usage: Usage, streamed: boolean, aborted: boolean) =>
      deps.metering.settleChat(hold, { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens }, { reasoningEffort: effort, api: 'chat.completions', streamed, aborted });

    if (!body.stream) {
      let outcome;
      try {
        outcome = await model.route.provider.chat(call);
      } catch (err) {
        await deps.metering.release(hold, 'upstream_error');
        throw err;
      }
      const billing = await settle(outcome.usage, false, false);
      deps.noteAppended(billing.position);
      setBillingHeaders(ctx, billing.billed, billing.remaining);
      ctx.body = {
        id, object: 'chat.completion', created, model: model.id, system_fingerprint: FINGERPRINT,
        choices: [{
          index: 0, finish_reason: outcome.finishReason, logprobs: null,
          message: { role: 'assistant', content: outcome.toolCalls.length && !outcome.content ? null : outcome.content, refusal: null, ...(outcome.toolCalls.length ? { tool_calls: outcome.toolCalls } : {}) },
        }],
        usage: usageBody(outcome.usage),
      };
      return;
    }

    const sse = openSse(ctx);
    setBillingHeaders(ctx, 0, await deps.metering.remaining(caller.accountId));
    sse.clientGone.addEventListener('abort', () => abort.abort());
    const chunk = (delta: Record<string, unknown>, finish: string | null) => ({ id, object: 'chat.completion.chunk', created, model: model.id, system_fingerprint: FINGERPRINT, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] });
    let streamedText = '';
    let toolArgs = '';
    void (async () => {
      try {
        sse.data(chunk({ role: 'assistant', content: '' }, null));
        for await (const part of model.route.provider.chatStream(call)) {
          if (part.type === 'text') {
            streamedText += part.text;
            sse.data(chunk({ content: part.text }, null));
          } else if (part.type === 'tool_call') {
            toolArgs += part.arguments ?? '';
            sse.data(chunk({ tool_calls: [{ index: part.index, ...(part.id ? { id: part.id, type: 'function' } : {}), function: { ...(part.name ? { name: part.name } : {}), arguments: part.arguments ?? '' } }] }, null));
          } else {
            // The charge is durable before the client is told the stream is complete.
            const billing = await settle(part.usage, true, false);
            deps.noteAppended(billing.position);
            ctx.state.billed = billing.billed;
            sse.data(chunk({}, part.finishReason));
            if (body.stream_options?.include_usage) sse.data({ id, object: 'chat.completion.chunk', created, model: model.id, system_fingerprint: FINGERPRINT, choices: [], usage: usageBody(part.usage) });
            sse.data('[DONE]');
            sse.end();
            return;
          }
        }
        throw new Error('upstream stream ended without a finish');
      } catch (err) {
        if (sse.clientGone.aborted || isAbortError(err)) {
          // The client left: charge the prompt and what was streamed, and stop.
          const billing = await settle({ prompt_tokens: promptTokens, completion_tokens: countTextTokens(streamedText) + countTextTokens(toolArgs) }, true, true).catch((e) => { deps.log.error({ err: (e as Error).message, requestId: caller.requestId }, 'settle after client abort failed'); return null; });
          if (billing) { deps.noteAppended(billing.position); ctx.state.billed = billing.billed; }
        } else {
          await deps.metering.release(hold, 'upstream_error').catch(() => undefined);
          ctx.state.errorCode = 'upstream_error';
          sse.data({ error: { message: 'The upstream model provider failed mid-stream; nothing was charged.', type: 'upstream_error', param: null, code: 'upstream_error' } });
        }
        sse.end();
      }
    })();
  };
}

export function usageBody(u: Usage) {
  return {
    prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens, total_tokens: u.prompt_tokens + u.completion_tokens,
    prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 },
  };
}
