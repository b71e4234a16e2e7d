// What a metered chat call (chat-call.ts) hands back to its route: a whole reply already settled,
// or a stream whose items say what to send (the last one charged already), and what it cost.
import type { ChatOutcome, ChatStreamPart, FinishReason, NativeReply, Usage } from '../upstream/port.ts';
import type { CatalogModel, Route } from '../catalogue/index.ts';

export interface Billing {
  billed: number;
  remaining: number;
}

/** A whole reply: the upstream's own body (pass-through) or the canonical outcome to render. */
export type ChatReply = { native: NativeReply } | { canonical: ChatOutcome };

/** A whole reply, already settled. */
export interface WholeChat {
  stream: false;
  model: CatalogModel & { route: Route };
  promptTokens: number;
  reply: ChatReply;
  billing: Billing;
}

/**
 * A stream that began (a channel answered). Its items say what to send; it settles before the
 * item that completes the reply, and ends, with the hold settled or released, when it is done.
 * A pass-through channel's stream (`native`) carries the upstream's own events; any other the
 * canonical parts the dialect renders (its opening events first, written before the first item).
 */
export type StreamedChat = { stream: true; model: CatalogModel & { route: Route }; promptTokens: number } & (
  { native: true; items: AsyncIterable<NativeItem | StreamFailure> } | { native: false; items: AsyncIterable<CanonicalItem | StreamFailure> }
);

export type ChatResult = WholeChat | StreamedChat;

/** An upstream event of a pass-through stream, to forward as it is (its usage says what the call cost). */
export interface NativeItem {
  type: 'event';
  event?: string;
  data: string;
}

export type CanonicalItem =
  | { type: 'text'; text: string }
  | { type: 'tool_call'; part: Extract<ChatStreamPart, { type: 'tool_call' }> }
  /** The last item of a reply that completed: charged already. */
  | { type: 'finish'; reason: FinishReason; usage: Usage; billing: Billing };

/** The stream failed after it began: the dialect's error event says `message`; `code` is why (for the log). */
export interface StreamFailure {
  type: 'failed';
  code: 'ledger_unavailable' | 'upstream_error';
  message: string;
}

export interface StreamRenderer {
  text(text: string): void;
  toolCall(part: Extract<ChatStreamPart, { type: 'tool_call' }>): void;
  finish(reason: FinishReason, usage: Usage, billing: Billing): void;
  error(message: string): void;
}
