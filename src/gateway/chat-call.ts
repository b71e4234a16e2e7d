// One metered chat call, whatever the dialect (chat completions, Anthropic Messages, Responses):
// resolve the model, hold the upper bound, call the model's channels (failover before anything
// reached the caller) capped at the hold, settle what the upstream reported or release the hold.
// A channel that speaks the caller's dialect gets the caller's own body (pass-through); any
// other is called in the canonical chat shape, which the dialect renders back.
import { abortWhenClientGone } from '../http/client-gone.ts';
import type { Context } from 'koa';
import type { GatewayDeps } from './deps.ts';
import { resolveCallerModel } from './model-access.ts';
import { countMessageTokensYielding, countTextTokens } from '../upstream/tokenizer.ts';
import {
  UpstreamError,
  type ChatCall,
  type ChatMessage,
  type ChatOutcome,
  type ChatStreamPart,
  type Dialect,
  type FinishReason,
  type NativeCall,
  type NativeProvider,
  type NativeReply,
  type NativeStreamEvent,
  type ToolDefinition,
  type Usage,
} from '../upstream/port.ts';
import type { UpstreamTrail } from '../ledger/events.ts';
import { setBillingHeaders } from './billing-headers.ts';
import { applyRateHeaders } from '../http/rate-limit.ts';
import { isAbortError } from '../upstream/abort.ts';
import type { SseWriter } from './sse.ts';
import { isResizable, LedgerUnreachable, releaseReasonOf } from './metering.ts';
import { databaseUnavailable } from '../http/errors.ts';
import { eventWithBilledTokens, withBilledTokens } from './billed-usage.ts';
import type { CatalogModel } from './model-catalog.ts';
import { failedAttemptsOf, failureCode, openWithFailover, withFailover, type FailedAttempt } from '../upstream/channels/failover.ts';
import type { Channel } from '../upstream/channels/registry.ts';
import type { Route } from './models-config.ts';

export interface ChatRequest {
  api: Dialect;
  model: string;
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  toolChoice?: unknown;
  maxTokens?: number;
  reasoningEffort?: string;
  params: Record<string, unknown>;
  /** Streamed replies commit their status with the first byte, so their hold must be committed first. */
  stream: boolean;
  /** The caller's validated body: what a channel speaking `api` natively receives (model and cap changed). */
  body: Record<string, unknown>;
  /** Dialect headers passed on with the body to a channel that speaks `api` natively (anthropic-beta). */
  headers?: Record<string, string>;
}

/** What a dialect translates its request into, before the gateway adds model and limits. */
export type CanonicalRequest = Pick<ChatRequest, 'messages' | 'tools' | 'toolChoice' | 'reasoningEffort' | 'params'>;

export interface Billing {
  billed: number;
  remaining: number;
}

/** A whole reply: the upstream's own body (pass-through) or the canonical outcome to render. */
export type ChatReply = { native: NativeReply } | { canonical: ChatOutcome };

export interface StreamWriters {
  /** The dialect's renderer of canonical parts; made only when a translated channel answers (it writes its own opening events). */
  renderer(): StreamRenderer;
  /** The dialect's error event, for a pass-through stream that fails after it began. */
  nativeError(message: string): void;
}

export interface OpenedChatStream {
  /** Writes the reply to the caller; settles before the final event leaves. */
  pipe(sse: SseWriter, writers: StreamWriters): void;
}

export interface PreparedChat {
  model: CatalogModel & { route: Route };
  promptTokens: number;
  /** Non-streamed: the upstream's reply, already settled. */
  complete(): Promise<{ reply: ChatReply; billing: Billing }>;
  /**
   * Streamed: opens the upstream stream (with failover until its first event). Throws, with the
   * hold released, when no channel could start it: the caller then gets an error status, not a 200.
   */
  openStream(): Promise<OpenedChatStream>;
}

export interface StreamRenderer {
  text(text: string): void;
  toolCall(part: Extract<ChatStreamPart, { type: 'tool_call' }>): void;
  finish(reason: FinishReason, usage: Usage, billing: Billing): void;
  error(message: string): void;
}

const trailOf = (channel: Channel, failed: FailedAttempt[], upstreamId: string | undefined): UpstreamTrail => ({
  channel: channel.id,
  upstreamModel: channel.upstreamModel,
  upstreamId: upstreamId ?? null,
  failovers: failed,
});

export async function prepareChat(deps: GatewayDeps, ctx: Context, req: ChatRequest): Promise<PreparedChat> {
  const model = await resolveCallerModel(deps, ctx, req.model);
  const caller = { keyId: ctx.state.auth.keyId, accountId: ctx.state.auth.accountId, requestId: ctx.state.requestId };
  // A call the account refuses anyway is refused before its prompt is counted.
  await deps.metering.refuseEarly(caller, model.id, model);
  // Counted in slices: a long prompt does not hold the event loop for other requests.
  const promptTokens = await countMessageTokensYielding(req.messages, req.tools);
  // A streamed reply commits its status with its first byte, so its hold is committed first; a
  // whole reply is only sent once settled, so its upstream call may start as soon as the hold is
  // decided (complete() below).
  const takeHold = (early: boolean) => deps.metering.reserveChat(caller, model.id, model, promptTokens, req.maxTokens, { early });
  let hold = await takeHold(!req.stream);
  applyRateHeaders(ctx, hold.rate);
  const nativeOf = (channel: Channel): NativeProvider | null => (channel.provider.native?.dialects.has(req.api) ? channel.provider.native : null);
  const nativeCall = (channel: Channel, signal: AbortSignal): NativeCall => ({
    dialect: req.api,
    upstreamModel: channel.upstreamModel,
    publicModel: model.id,
    body: req.body,
    maxTokens: hold.maxCompletionTokens,
    signal,
    headers: req.headers,
  });
  const chatCall = (channel: Channel, signal: AbortSignal): ChatCall => ({
    upstreamModel: channel.upstreamModel,
    messages: req.messages,
    maxTokens: hold.maxCompletionTokens,
    reasoningEffort: req.reasoningEffort,
    tools: req.tools,
    toolChoice: req.toolChoice,
    params: req.params,
    signal,
  });
  const failover = (signal: AbortSignal) => ({ registry: deps.channels, signal });
  // A client that left (even while the call was being prepared) stops the upstream too.
  let abort = abortWhenClientGone(ctx);
  const effort = req.reasoningEffort ?? null;
  const settle = async (usage: Usage, streamed: boolean, aborted: boolean, trail: UpstreamTrail): Promise<Billing> => {
    const b = await deps.metering.settleChat(hold, usage, { reasoningEffort: effort, api: req.api, streamed, aborted, trail });
    ctx.state.billed = b.billed;
    return b;
  };
  const release = (err: unknown, clientLeft: boolean, attempts = failedAttemptsOf(err)) =>
    deps.metering.release(hold, releaseReasonOf(err, clientLeft), attempts);
  const startUpstream = () => {
    const signal = abort.signal;
    const reply = withFailover(model.route.channels, failover(signal), async (channel): Promise<ChatReply> => {
      const native = nativeOf(channel);
      return native ? { native: await native.call(nativeCall(channel, signal)) } : { canonical: await channel.provider.chat(chatCall(channel, signal)) };
    });
    reply.catch(() => undefined); // awaited later; not an unhandled rejection meanwhile
    return reply;
  };

  return {
    model,
    promptTokens,
    async complete() {
      // The upstream call runs while the hold's append is in flight. Its charge is queued behind
      // the hold on the account's lane (one append with it when the upstream answered first), so
      // nothing is answered or charged before the hold is committed.
      let upstream = startUpstream();
      // An overturned hold (another process took the account's tokens first) stops its call at once.
      const stopIfOverturned = (h: typeof hold, a: AbortController) => h.committed.catch(() => a.abort());
      void stopIfOverturned(hold, abort);
      for (;;) {
        let answered: Awaited<typeof upstream> | null = null;
        let failure: unknown = null;
        try {
          answered = await upstream;
        } catch (err) {
          failure = err;
        }
        const overturnedHold = () =>
          hold.committed.then(
            () => null,
            (err: unknown) => err ?? new Error('hold overturned'),
          );
        let overturned: unknown;
        if (answered) {
          const answer = answered.value;
          const { usage, upstreamId } = 'native' in answer ? answer.native : answer.canonical;
          try {
            const billing = await settle(usage, false, false, trailOf(answered.channel, answered.failed, upstreamId));
            setBillingHeaders(ctx, billing.billed, billing.remaining);
            // The upstream's own body, with what the call cost added to its usage.
            const reply: ChatReply = 'native' in answer ? { native: { ...answer.native, body: withBilledTokens(answer.native.body, billing.billed) } } : answer;
            return { reply, billing };
          } catch (err) {
            // The ledger's bound passed: the call fails now (its hold is left to the release retry).
            if (err instanceof LedgerUnreachable) throw err;
            // The charge fails when its hold was overturned (then it finds no hold): retried below.
            overturned = await overturnedHold();
            if (!overturned) throw err;
          }
        } else {
          // Within the ledger's bound: past it, the hold is released as the upstream failure says.
          overturned = await hold.budget.wait(overturnedHold()).catch(() => null);
          if (!overturned) {
            await release(failure, abort.signal.aborted);
            throw failure;
          }
        }
        // This call's reply must never reach the client. Hold again on the fresh state (re-sized,
        // committed before anything starts) and call the upstream again within it.
        abort.abort();
        if (!isResizable(overturned)) throw overturned;
        hold = await takeHold(false);
        applyRateHeaders(ctx, hold.rate);
        abort = abortWhenClientGone(ctx);
        upstream = startUpstream();
      }
    },

    async openStream() {
      const signal = abort.signal;
      let opened: Awaited<ReturnType<typeof openWithFailover<NativeStreamEvent | ChatStreamPart>>>;
      try {
        opened = await openWithFailover<NativeStreamEvent | ChatStreamPart>(model.route.channels, failover(signal), (channel) => {
          const native = nativeOf(channel);
          return native ? native.stream(nativeCall(channel, signal)) : channel.provider.chatStream(chatCall(channel, signal));
        });
      } catch (err) {
        await release(err, signal.aborted);
        throw err;
      }
      const { channel, failed } = opened;
      const native = nativeOf(channel) !== null;
      const items = opened.value;
      return {
        pipe(sse, writers) {
          // What the caller has received so far: charged (with the prompt) if the caller leaves.
          let generated = '';
          let upstreamId: string | undefined;
          // The prompt as the upstream counted it, once it said (else the gateway's own count).
          let prompt: Usage = { prompt_tokens: promptTokens, completion_tokens: 0 };
          // Set once the charge is committed (not when it is sent: a charge that cannot commit
          // must end the stream with an error, not in silence).
          let settled = false;
          const settleOnce = async (usage: Usage, aborted: boolean, upstreamId?: string) => {
            const billing = await settle(usage, true, aborted, trailOf(channel, failed, upstreamId));
            settled = true;
            return billing;
          };
          const renderer = native ? null : writers.renderer();
          void (async () => {
            try {
              for await (const item of items) {
                if (native) {
                  const event = item as NativeStreamEvent;
                  if (event.generated) generated += event.generated;
                  if (event.upstreamId) upstreamId = event.upstreamId;
                  if (event.promptUsage) prompt = event.promptUsage;
                  // The charge is durable before the event that completes the reply is forwarded,
                  // and that event's usage says what it cost.
                  let data = event.data;
                  if (event.usage && !settled) data = eventWithBilledTokens(data, (await settleOnce(event.usage, false, event.upstreamId)).billed);
                  if (!event.hidden) sse.raw(event.event ? `event: ${event.event}\ndata: ${data}\n\n` : `data: ${data}\n\n`);
                  continue;
                }
                const part = item as ChatStreamPart;
                if (part.type === 'text') {
                  generated += part.text;
                  renderer!.text(part.text);
                } else if (part.type === 'tool_call') {
                  generated += (part.name ?? '') + (part.arguments ?? '');
                  renderer!.toolCall(part);
                } else {
                  const billing = await settleOnce(part.usage, false, part.upstreamId);
                  renderer!.finish(part.finishReason, part.usage, billing);
                  sse.end();
                  return;
                }
              }
              if (!native) throw new UpstreamError('upstream stream ended without a finish');
              // A pass-through stream that completed without a usage report: charge what it carried.
              if (!settled) await settleOnce({ ...prompt, completion_tokens: countTextTokens(generated) }, false, upstreamId);
              sse.end();
            } catch (err) {
              if (settled) {
                // Charged already: the reply was complete; only its tail was lost.
              } else if (err instanceof LedgerUnreachable) {
                // The charge could not be committed (the database is out of reach): the call is not
                // charged, its hold is released once the database is back, and the client is told.
                ctx.state.errorCode = 'ledger_unavailable';
                deps.log.warn({ requestId: caller.requestId }, 'stream ended with an error: its charge could not be committed');
                const message = databaseUnavailable().message;
                if (renderer) renderer.error(message);
                else writers.nativeError(message);
              } else if (sse.clientGone.aborted || isAbortError(err)) {
                // The client left: charge the prompt and what was streamed so far, and stop.
                await settleOnce({ ...prompt, completion_tokens: countTextTokens(generated) }, true, upstreamId).catch((e) =>
                  deps.log.error({ err: (e as Error).message, requestId: caller.requestId }, 'settle after client abort failed'),
                );
              } else {
                // The channel that broke mid-stream is on the record too (for reconciliation).
                await release(err, false, [...failed, { channel: channel.id, upstreamModel: channel.upstreamModel, error: failureCode(err) }]).catch(
                  () => undefined,
                );
                ctx.state.errorCode = 'upstream_error';
                const message = 'The upstream model provider failed mid-stream; nothing was charged.';
                if (renderer) renderer.error(message);
                else writers.nativeError(message);
              }
              sse.end();
            }
          })();
        },
      };
    },
  };
}
