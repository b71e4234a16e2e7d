// Reading an OpenAI event stream (chat completion chunks or Responses events) under the call's
// deadline: the silence timer is paused while the consumer handles an event, network failures
// and timeouts become UpstreamError, caller aborts stay aborts.
import { UpstreamError } from '../port.ts';
import { asUpstreamFailure, type Deadline, type UpstreamResponse } from '../upstream-http.ts';
import { readSse, type SseEvent } from '../sse.ts';

export interface EventStreamOptions {
  op: string;
  signal: AbortSignal;
  deadline: Deadline;
}

/**
 * The SSE events of a 2xx response, as they arrive. The consumer decides where the stream ends
 * (leaving the loop closes the connection); the deadline is cleared when this ends.
 */
export async function* upstreamEvents(response: UpstreamResponse, options: EventStreamOptions): AsyncGenerator<SseEvent> {
  const { op, signal, deadline } = options;
  try {
    if (!(response.headers.get('content-type') ?? '').includes('text/event-stream')) {
      // Drop the connection rather than read an unexpected body to its end.
      await response.body[Symbol.asyncIterator]().return?.();
      throw new UpstreamError(`upstream ${op} did not answer with an event stream`);
    }
    for await (const event of readSse(response.body, () => deadline.touch())) {
      // The silence timer must not run while a slow client is consuming what we yield.
      deadline.clear();
      yield event;
      deadline.touch();
    }
  } catch (error) {
    throw asUpstreamFailure(error, op, signal, deadline);
  } finally {
    deadline.clear();
  }
}
