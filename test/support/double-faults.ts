// Fault scripting shared by the Anthropic and OpenAI doubles. A test queues faults with
// script(...); each incoming request (any route) takes the next one, and when the queue is
// empty the default applies (none unless setDefault was called). The fields combine, e.g.
// { firstByteDelayMs: 200, cutAfterEvents: 3 } is a slow stream that then breaks.

export interface Fault {
  /** Answer with this HTTP status instead of handling the request. */
  status?: number;
  /** Body for `status`: an object is sent as JSON, a string verbatim; default: the API's own error shape for that status. */
  body?: unknown;
  /** Extra response headers for `status` (a 429 gets `retry-after: 1` unless given). */
  headers?: Record<string, string>;
  /** Wait this long before sending anything (the status line included). */
  firstByteDelayMs?: number;
  /** Never answer; the response ends only when the client leaves (or the double closes). */
  hang?: boolean;
  /** Answer 200 with a body that does not parse (an unterminated JSON document or SSE event). */
  garbage?: boolean;
  /** Streams: destroy the socket after this many SSE events. Plain responses: send half the body, then destroy. */
  cutAfterEvents?: number;
  /** Streams: after this many events, send the API's mid-stream error event and end the stream. */
  errorEventAfter?: number;
  /** Streams: pause between SSE events. */
  chunkDelayMs?: number;
}

/** The queue of scripted faults plus the default used when it is empty. */
export class FaultScript {
  #queue: Fault[] = [];
  #default: Fault | null = null;

  script(...faults: Fault[]): void {
    this.#queue.push(...faults);
  }

  setDefault(fault: Fault | null): void {
    this.#default = fault;
  }

  /** The fault for the next request; an empty object means "behave normally". */
  take(): Fault {
    return this.#queue.shift() ?? this.#default ?? {};
  }
}
