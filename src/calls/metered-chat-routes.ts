// The HTTP side of a metered chat call (gateway/chat-call.ts), shared by its three dialects: the
// caller and the request's plain values in, what the call tells on the way (the model, the call
// rate, the charge) onto the response and ctx.state, and its stream out as server-sent events.
import type { Context } from 'koa';
import type { CallDeps } from './call-deps.ts';
import { callChat, type ChatRequest } from './chat-call.ts';
import type { ChatResult, StreamedChat, StreamFailure, StreamRenderer } from './chat-results.ts';
import { applyRateHeaders } from '../http/rate-limit.ts';
import { setBillingHeaders, setRemainingHeader } from '../http/billing-headers.ts';
import { clientGone } from '../http/client-gone.ts';
import { openSse, type SseWriter } from '../http/sse.ts';
import { keyCallerOf } from '../http/state.ts';
import { callTraceOf } from '../http/call-spans.ts';
import { timelineOf } from '../http/call-timeline.ts';

/** The call for the request's API key; a whole reply's billing headers are set before it returns. */
export async function chatCall(deps: CallDeps, ctx: Context, req: ChatRequest): Promise<ChatResult> {
  const result = await callChat(
    deps,
    {
      caller: keyCallerOf(ctx),
      clientGone: clientGone(ctx),
      baseUrl: deps.baseUrl(ctx),
      trace: callTraceOf(ctx),
      timeline: timelineOf(ctx),
      notes: {
        model: (id) => {
          ctx.state.model = id;
        },
        rate: (decision) => applyRateHeaders(ctx, decision),
        billed: (tokens) => {
          ctx.state.billed = tokens;
        },
      },
    },
    req,
  );
  if (!result.stream) setBillingHeaders(ctx, result.billing.billed, result.billing.remaining);
  return result;
}

export interface StreamWriters {
  /** The dialect's renderer of canonical parts; made only when a translated channel answers (it writes its own opening events). */
  renderer(sse: SseWriter): StreamRenderer;
  /** The dialect's error event, for a pass-through stream that fails after it began. */
  nativeError(sse: SseWriter, message: string): void;
}

/**
 * Answers with the stream: a 200 of server-sent events whose headers say what was left when it
 * began (what the call cost is in the stream itself, never a header). The items are sent as they
 * come, after this returns (Koa sends the response once the route is done).
 */
export async function sendChatStream(deps: CallDeps, ctx: Context, chat: StreamedChat, writers: StreamWriters): Promise<void> {
  const sse = openSse(ctx);
  setRemainingHeader(ctx, await deps.metering.remaining(keyCallerOf(ctx).accountId));
  const failed = (failure: StreamFailure, tell: (message: string) => void) => {
    ctx.state.errorCode = failure.code;
    tell(failure.message);
  };
  if (chat.native) {
    void (async () => {
      for await (const item of chat.items) {
        if (item.type === 'failed') failed(item, (message) => writers.nativeError(sse, message));
        else sse.raw(item.event ? `event: ${item.event}\ndata: ${item.data}\n\n` : `data: ${item.data}\n\n`);
      }
      sse.end();
    })();
    return;
  }
  const renderer = writers.renderer(sse);
  void (async () => {
    for await (const item of chat.items) {
      if (item.type === 'text') renderer.text(item.text);
      else if (item.type === 'tool_call') renderer.toolCall(item.part);
      else if (item.type === 'failed') failed(item, (message) => renderer.error(message));
      else {
        renderer.finish(item.reason, item.usage, item.billing);
        // The reply is complete: it ends now, whatever closing the upstream's stream takes.
        sse.end();
      }
    }
    sse.end();
  })();
}
