// One metered chat call, whatever the dialect (chat completions, Anthropic Messages, Responses):
// resolve the model, hold the upper bound, call the upstream capped at the hold, settle the
// actual usage or release the hold. Dialects only translate requests and render replies.
import { abortWhenClientGone } from '../http/client-gone.ts';
import type { Context } from 'koa';
import type { GatewayDeps } from './deps.ts';
import { resolveCallerModel } from './model-access.ts';
import { countMessageTokens, countTextTokens } from '../upstream/tokenizer.ts';
import type { ChatCall, ChatMessage, ChatOutcome, ChatStreamPart, FinishReason, ToolDefinition, Usage } from '../upstream/port.ts';
import type { ChatApi } from '../ledger/events.ts';
import { setBillingHeaders } from './billing-headers.ts';
import { applyRateHeaders } from '../http/rate-limit.ts';
import { isAbortError } from '../upstream/abort.ts';
import type { SseWriter } from './sse.ts';
import type { CatalogModel } from './model-catalog.ts';
import type { Hold } from './metering.ts';
import { DomainError } from '../ledger/errors.ts';

export interface ChatRequest {
  api: ChatApi;
  model: string;
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  toolChoice?: unknown;
  maxTokens?: number;
  reasoningEffort?: string;
  params: Record<string, unknown>;
  /** Streamed replies commit their status with the first byte, so their hold must be committed first. */
  stream: boolean;
}

/** What a dialect translates its request into, before the gateway adds model and limits. */
export type CanonicalRequest = Pick<ChatRequest, 'messages' | 'tools' | 'toolChoice' | 'reasoningEffort' | 'params'>;

export interface Billing { billed: number; remaining: number }

export interface PreparedChat {
  model: CatalogModel;
  promptTokens: number;
  /** Non-streamed: the upstream's reply, already settled. */
  complete(): Promise<{ outcome: ChatOutcome; billing: Billing }>;
  /** Streamed: feeds parts to the renderer; settles before `finish` is rendered. */
  stream(sse: SseWriter, render: StreamRenderer): void;
}

export interface StreamRenderer {
  text(text: string): void;
  toolCall(part: Extract<ChatStreamPart, { type: 'tool_call' }>): void;
  finish(reason: FinishReason, usage: Usage, billing: Billing): void;
  error(message: string): void;
}

export async function prepareChat(deps: GatewayDeps, ctx: Context, req: ChatRequest): Promise<PreparedChat> {
  const model = await resolveCallerModel(deps, ctx, req.model);
  const caller = { keyId: ctx.state.auth.keyId, accountId: ctx.state.auth.accountId, requestId: ctx.state.requestId };
  const promptTokens = countMessageTokens(req.messages, req.tools);
  // A streamed reply commits its status with its first byte, so its hold is committed first; a
  // whole reply is only sent once settled, so its upstream call may start as soon as the hold is
  // decided (complete() below).
  const takeHold = (early: boolean) => deps.metering.reserveChat(caller, model.id, model.multiplierMilli, promptTokens, req.maxTokens, { early });
  let hold = await takeHold(!req.stream);
  applyRateHeaders(ctx, hold.rate);
  const callWith = (h: Hold, signal: AbortSignal): ChatCall => ({
    upstreamModel: model.route.upstreamModel, messages: req.messages, maxTokens: h.maxCompletionTokens,
    reasoningEffort: req.reasoningEffort, tools: req.tools, toolChoice: req.toolChoice, params: req.params, signal,
  });
  // A client that left (even while the call was being prepared) stops the upstream too.
  let abort = abortWhenClientGone(ctx);
  let call = callWith(hold, abort.signal);
  const effort = req.reasoningEffort ?? null;
  const settle = async (usage: Usage, streamed: boolean, aborted: boolean): Promise<Billing> => {
    const b = await deps.metering.settleChat(hold, { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens }, { reasoningEffort: effort, api: req.api, streamed, aborted });
    deps.noteAppended(b.position);
    ctx.state.billed = b.billed;
    return b;
  };
  const startUpstream = () => {
    const reply = model.route.provider.chat(call);
    reply.catch(() => undefined); // awaited later; not an unhandled rejection meanwhile
    return reply;
  };
  return {
    model, promptTokens,
    async complete() {
      // The upstream call runs while the hold's append is in flight; nothing is answered or
      // charged before the hold is committed.
      let upstream = startUpstream();
      try {
        await hold.committed;
      } catch (err) {
        // The decision was overturned: another process took the account's tokens first. This
        // call's reply must never reach the client. Hold again on the fresh state (re-sized,
        // committed before anything starts) and call the upstream again within that hold.
        abort.abort();
        if (!(err instanceof DomainError && err.code === 'insufficient_quota')) throw err;
        hold = await takeHold(false);
        applyRateHeaders(ctx, hold.rate);
        abort = abortWhenClientGone(ctx);
        call = callWith(hold, abort.signal);
        upstream = startUpstream();
      }
      let outcome: ChatOutcome;
      try {
        outcome = await upstream;
      } catch (err) {
        await deps.metering.release(hold, abort.signal.aborted ? 'client_aborted' : 'upstream_error');
        throw err;
      }
      const billing = await settle(outcome.usage, false, false);
      setBillingHeaders(ctx, billing.billed, billing.remaining);
      return { outcome, billing };
    },
    stream(sse, render) {
      let streamedText = '';
      void (async () => {
        try {
          for await (const part of model.route.provider.chatStream(call)) {
            if (part.type === 'text') {
              streamedText += part.text;
              render.text(part.text);
            } else if (part.type === 'tool_call') {
              streamedText += (part.name ?? '') + (part.arguments ?? '');
              render.toolCall(part);
            } else {
              // The charge is durable before the client is told the stream is complete.
              const billing = await settle(part.usage, true, false);
              render.finish(part.finishReason, part.usage, billing);
              sse.end();
              return;
            }
          }
          throw new Error('upstream stream ended without a finish');
        } catch (err) {
          if (sse.clientGone.aborted || isAbortError(err)) {
            // The client left: charge the prompt and what was streamed so far, and stop.
            await settle({ prompt_tokens: promptTokens, completion_tokens: countTextTokens(streamedText) }, true, true)
              .catch((e) => deps.log.error({ err: (e as Error).message, requestId: caller.requestId }, 'settle after client abort failed'));
          } else {
            await deps.metering.release(hold, 'upstream_error').catch(() => undefined);
            ctx.state.errorCode = 'upstream_error';
            render.error('The upstream model provider failed mid-stream; nothing was charged.');
          }
          sse.end();
        }
      })();
    },
  };
}
