// One metered chat call, whatever the dialect (chat completions, Anthropic Messages, Responses):
// resolve the model, hold the upper bound, call the model's channels (failover before anything
// reached the caller) capped at the hold, settle what the upstream reported or release the hold.
// A channel that speaks the caller's dialect gets the caller's own body (pass-through); any
// other is called in the canonical chat shape, which the dialect renders back.
import type { CallDeps } from './call-deps.ts';
import type { Billing, CanonicalItem, ChatReply, ChatResult, NativeItem, StreamedChat, StreamFailure, WholeChat } from './chat-results.ts';
import { resolveCallerModel } from './model-access.ts';
import { countMessageTokensYielding, countTextTokens } from '../upstream/tokenizer.ts';
import {
  UpstreamError,
  type ChatCall,
  type ChatMessage,
  type ChatStreamPart,
  type Dialect,
  type NativeCall,
  type NativeProvider,
  type NativeStreamEvent,
  type ToolDefinition,
  type Usage,
} from '../upstream/port.ts';
import type { UpstreamTrail } from '../ledger/events.ts';
import { abortedWith, isAbortError } from '../upstream/abort.ts';
import { isResizable, LedgerUnreachable, releaseReasonOf, type Hold } from './metering.ts';
import type { KeyCaller } from '../http/caller.ts';
import type { RateDecision } from '../ledger/call-rate.ts';
import { databaseUnavailable } from '../http/errors.ts';
import { eventWithBilledTokens, withBilledTokens } from './billed-usage.ts';
import type { CatalogModel, Route } from '../catalogue/index.ts';
import { failedAttemptsOf, failureCode, openWithFailover, withFailover, type FailedAttempt } from '../upstream/channels/failover.ts';
import type { Channel } from '../upstream/channels/registry.ts';
import { inSpan, noteUsage, type TraceContext } from '../tracing/spans.ts';
import type { CallTimeline } from '../tracing/call-phases.ts';

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

/** What the HTTP side hands a call: who calls, and plain values of the request it came with. */
export interface CallRequest {
  caller: KeyCaller;
  /** Aborted once the client has left before its answer was complete. */
  clientGone: AbortSignal;
  /** The API base named in a refusal of the model (GET {base}/models). */
  baseUrl: string;
  /** Told as the call goes, for the answer's headers, the access log and the metrics. */
  notes: CallNotes;
  /** The call's span: the parent of its steps' spans (hold, upstream attempts, charge). */
  trace: TraceContext;
  /** Marks the end of each of its steps, while phases are recorded (src/tracing/call-phases.ts). */
  timeline: CallTimeline;
}

export interface CallNotes {
  /** The model the caller may use, once resolved (before anything is held). */
  model(id: string): void;
  /** Where the account stands on its plan's call rate after the hold (again after a re-sized hold). */
  rate(decision: RateDecision | null): void;
  /** What the call was charged, once the charge is committed. */
  billed(tokens: number): void;
}

const trailOf = (channel: Channel, failed: FailedAttempt[], upstreamId: string | undefined): UpstreamTrail => ({
  channel: channel.id,
  upstreamModel: channel.upstreamModel,
  upstreamId: upstreamId ?? null,
  failovers: failed,
});

/**
 * One metered chat call: the route calls it once with its caller and request and renders what
 * comes back. A whole reply is returned settled; a stream is returned once a channel began it
 * (failover until its first event), and settles as it is read. Either throws, with the hold
 * released, when no channel answered: the caller then gets an error status, not a 200.
 */
export async function callChat(deps: CallDeps, call: CallRequest, req: ChatRequest): Promise<ChatResult> {
  const { caller } = call;
  const model = await resolveCallerModel(deps, caller, req.model, call.baseUrl);
  call.notes.model(model.id);
  // A call the account refuses anyway is refused before its prompt is counted.
  await deps.metering.refuseEarly(caller, model.id, model);
  call.timeline.mark('model');
  // Counted in slices: a long prompt does not hold the event loop for other requests.
  const promptTokens = await countMessageTokensYielding(req.messages, req.tools);
  call.timeline.mark('count');
  // A streamed reply commits its status with its first byte, so its hold is committed first; a
  // whole reply is only sent once settled, so its upstream call may start as soon as the hold is
  // decided (wholeReply below).
  const traceContext = call.trace;
  const takeHold = (early: boolean) =>
    inSpan('tollgate.hold', { 'tollgate.prompt_tokens_counted': promptTokens }, traceContext, async (span) => {
      const hold = await deps.metering.reserveChat(caller, model.id, model, promptTokens, req.maxTokens, { early });
      span.setAttribute('tollgate.hold.tokens', hold.amount);
      call.notes.rate(hold.rate);
      return hold;
    });
  const run: ChatRun = { deps, call, req, model, promptTokens, hold: await takeHold(!req.stream), takeHold, traceContext };
  call.timeline.mark('hold_decide');
  return req.stream ? openStream(run) : wholeReply(run);
}

/** One call's state between its steps: the hold is replaced when it is re-sized. */
interface ChatRun {
  deps: CallDeps;
  call: CallRequest;
  req: ChatRequest;
  model: CatalogModel & { route: Route };
  promptTokens: number;
  hold: Hold;
  takeHold(early: boolean): Promise<Hold>;
  /** The call's span: its steps (a stream's charge too, settled as the stream is read) are its children. */
  traceContext: TraceContext;
}

const nativeOf = (run: ChatRun, channel: Channel): NativeProvider | null =>
  channel.provider.native?.dialects.has(run.req.api) ? channel.provider.native : null;

const nativeCall = (run: ChatRun, channel: Channel, signal: AbortSignal): NativeCall => ({
  dialect: run.req.api,
  upstreamModel: channel.upstreamModel,
  publicModel: run.model.id,
  body: run.req.body,
  maxTokens: run.hold.maxCompletionTokens,
  signal,
  headers: run.req.headers,
});

const chatCall = (run: ChatRun, channel: Channel, signal: AbortSignal): ChatCall => ({
  upstreamModel: channel.upstreamModel,
  messages: run.req.messages,
  maxTokens: run.hold.maxCompletionTokens,
  reasoningEffort: run.req.reasoningEffort,
  tools: run.req.tools,
  toolChoice: run.req.toolChoice,
  params: run.req.params,
  signal,
});

const failover = (run: ChatRun, signal: AbortSignal) => ({ registry: run.deps.channels, signal, trace: run.traceContext });

async function settle(run: ChatRun, usage: Usage, streamed: boolean, aborted: boolean, trail: UpstreamTrail): Promise<Billing> {
  const effort = run.req.reasoningEffort ?? null;
  const b = await inSpan('tollgate.charge', { 'tollgate.channel': trail.channel }, run.traceContext, async (span) => {
    const billing = await run.deps.metering.settleChat(run.hold, usage, { reasoningEffort: effort, api: run.req.api, streamed, aborted, trail });
    span.setAttribute('tollgate.billed_tokens', billing.billed);
    return billing;
  });
  noteUsage(run.traceContext, usage, b.billed);
  run.call.notes.billed(b.billed);
  return b;
}

const release = (run: ChatRun, err: unknown, clientLeft: boolean, attempts = failedAttemptsOf(err)) =>
  run.deps.metering.release(run.hold, releaseReasonOf(err, clientLeft), attempts);

function startUpstream(run: ChatRun, signal: AbortSignal) {
  const reply = withFailover(run.model.route.channels, failover(run, signal), async (channel): Promise<ChatReply> => {
    const native = nativeOf(run, channel);
    return native
      ? { native: await native.call(nativeCall(run, channel, signal)) }
      : { canonical: await channel.provider.chat(chatCall(run, channel, signal)) };
  });
  reply.catch(() => undefined); // awaited later; not an unhandled rejection meanwhile
  return reply;
}

async function wholeReply(run: ChatRun): Promise<WholeChat> {
  // A client that left (even while the call was being prepared) stops the upstream too.
  let abort = abortedWith(run.call.clientGone);
  // The upstream call runs while the hold's append is in flight. Its charge is queued behind
  // the hold on the account's lane (one append with it when the upstream answered first), so
  // nothing is answered or charged before the hold is committed.
  let upstream = startUpstream(run, abort.signal);
  // An overturned hold (another process took the account's tokens first) stops its call at once.
  const stopIfOverturned = (h: Hold, a: AbortController) => h.committed.catch(() => a.abort());
  void stopIfOverturned(run.hold, abort);
  for (;;) {
    let answered: Awaited<typeof upstream> | null = null;
    let failure: unknown = null;
    try {
      answered = await upstream;
    } catch (err) {
      failure = err;
    }
    const overturnedHold = () =>
      run.hold.committed.then(
        () => null,
        (err: unknown) => err ?? new Error('hold overturned'),
      );
    let overturned: unknown;
    if (answered) {
      run.call.timeline.mark('upstream');
      const answer = answered.value;
      const { usage, upstreamId } = 'native' in answer ? answer.native : answer.canonical;
      try {
        const billing = await settle(run, usage, false, false, trailOf(answered.channel, answered.failed, upstreamId));
        run.call.timeline.mark('charge');
        // The upstream's own body, with what the call cost added to its usage.
        const reply: ChatReply = 'native' in answer ? { native: { ...answer.native, body: withBilledTokens(answer.native.body, billing.billed) } } : answer;
        return { stream: false, model: run.model, promptTokens: run.promptTokens, reply, billing };
      } catch (err) {
        // The ledger's bound passed: the call fails now (its hold is left to the release retry).
        if (err instanceof LedgerUnreachable) throw err;
        // The charge fails when its hold was overturned (then it finds no hold): retried below.
        overturned = await overturnedHold();
        if (!overturned) throw err;
      }
    } else {
      // Within the ledger's bound: past it, the hold is released as the upstream failure says.
      overturned = await run.hold.budget.wait(overturnedHold()).catch(() => null);
      if (!overturned) {
        await release(run, failure, abort.signal.aborted);
        throw failure;
      }
    }
    // This call's reply must never reach the client. Hold again on the fresh state (re-sized,
    // committed before anything starts) and call the upstream again within it.
    abort.abort();
    if (!isResizable(overturned)) throw overturned;
    run.hold = await run.takeHold(false);
    abort = abortedWith(run.call.clientGone);
    upstream = startUpstream(run, abort.signal);
  }
}

async function openStream(run: ChatRun): Promise<StreamedChat> {
  // A client that left (even while the call was being prepared) stops the upstream too.
  const signal = abortedWith(run.call.clientGone).signal;
  let opened: Awaited<ReturnType<typeof openWithFailover<NativeStreamEvent | ChatStreamPart>>>;
  try {
    opened = await openWithFailover<NativeStreamEvent | ChatStreamPart>(run.model.route.channels, failover(run, signal), (channel) => {
      const native = nativeOf(run, channel);
      return native ? native.stream(nativeCall(run, channel, signal)) : channel.provider.chatStream(chatCall(run, channel, signal));
    });
  } catch (err) {
    await release(run, err, signal.aborted);
    throw err;
  }
  const stream = new StreamCharge(run, opened.channel, opened.failed);
  const { model, promptTokens } = run;
  return nativeOf(run, opened.channel)
    ? { stream: true, model, promptTokens, native: true, items: stream.native(opened.value as AsyncIterable<NativeStreamEvent>) }
    : { stream: true, model, promptTokens, native: false, items: stream.canonical(opened.value as AsyncIterable<ChatStreamPart>) };
}

/** What a stream has carried so far, and its charge: settled once, before the event that completes the reply. */
class StreamCharge {
  /** What the caller has received so far: charged (with the prompt) if the caller leaves. */
  private generated = '';
  private upstreamId: string | undefined;
  /** The prompt as the upstream counted it, once it said (else the gateway's own count). */
  private prompt: Usage;
  /**
   * Set once the charge is committed (not when it is sent: a charge that cannot commit must end
   * the stream with an error, not in silence).
   */
  private settled = false;

  constructor(
    private readonly run: ChatRun,
    private readonly channel: Channel,
    private readonly failed: FailedAttempt[],
  ) {
    this.prompt = { prompt_tokens: run.promptTokens, completion_tokens: 0 };
  }

  private async settleOnce(usage: Usage, aborted: boolean, upstreamId?: string): Promise<Billing> {
    const billing = await settle(this.run, usage, true, aborted, trailOf(this.channel, this.failed, upstreamId));
    this.settled = true;
    return billing;
  }

  /** A pass-through stream: the upstream's events as they are, the completing one with what the call cost. */
  async *native(events: AsyncIterable<NativeStreamEvent>): AsyncGenerator<NativeItem | StreamFailure> {
    try {
      for await (const event of events) {
        if (event.generated) this.generated += event.generated;
        if (event.upstreamId) this.upstreamId = event.upstreamId;
        if (event.promptUsage) this.prompt = event.promptUsage;
        // The charge is durable before the event that completes the reply is forwarded, and that
        // event's usage says what it cost.
        let data = event.data;
        if (event.usage && !this.settled) data = eventWithBilledTokens(data, (await this.settleOnce(event.usage, false, event.upstreamId)).billed);
        if (!event.hidden) yield { type: 'event', event: event.event, data };
      }
      // A pass-through stream that completed without a usage report: charge what it carried.
      if (!this.settled) await this.settleOnce({ ...this.prompt, completion_tokens: countTextTokens(this.generated) }, false, this.upstreamId);
    } catch (err) {
      const failure = await this.afterFailure(err);
      if (failure) yield failure;
    }
  }

  /** A translated stream: the canonical parts, the last one (finish) charged already. */
  async *canonical(parts: AsyncIterable<ChatStreamPart>): AsyncGenerator<CanonicalItem | StreamFailure> {
    try {
      for await (const part of parts) {
        if (part.type === 'text') {
          this.generated += part.text;
          yield { type: 'text', text: part.text };
        } else if (part.type === 'tool_call') {
          this.generated += (part.name ?? '') + (part.arguments ?? '');
          yield { type: 'tool_call', part };
        } else {
          const billing = await this.settleOnce(part.usage, false, part.upstreamId);
          yield { type: 'finish', reason: part.finishReason, usage: part.usage, billing };
          return;
        }
      }
      throw new UpstreamError('upstream stream ended without a finish');
    } catch (err) {
      const failure = await this.afterFailure(err);
      if (failure) yield failure;
    }
  }

  /** A stream that broke after it began: charged or released as the cause says; the failure to tell the caller, if any. */
  private async afterFailure(err: unknown): Promise<StreamFailure | null> {
    const { deps, call } = this.run;
    if (this.settled) return null; // Charged already: the reply was complete; only its tail was lost.
    if (err instanceof LedgerUnreachable) {
      // The charge could not be committed (the database is out of reach): the call is not
      // charged, its hold is released once the database is back, and the client is told.
      deps.log.warn({ requestId: call.caller.requestId }, 'stream ended with an error: its charge could not be committed');
      return { type: 'failed', code: 'ledger_unavailable', message: databaseUnavailable().message };
    }
    if (call.clientGone.aborted || isAbortError(err)) {
      // The client left: charge the prompt and what was streamed so far, and stop.
      await this.settleOnce({ ...this.prompt, completion_tokens: countTextTokens(this.generated) }, true, this.upstreamId).catch((e) =>
        deps.log.error({ err: (e as Error).message, requestId: call.caller.requestId }, 'settle after client abort failed'),
      );
      return null;
    }
    // The channel that broke mid-stream is on the record too (for reconciliation).
    const attempts = [...this.failed, { channel: this.channel.id, upstreamModel: this.channel.upstreamModel, error: failureCode(err) }];
    await release(this.run, err, false, attempts).catch(() => undefined);
    return { type: 'failed', code: 'upstream_error', message: 'The upstream model provider failed mid-stream; nothing was charged.' };
  }
}
