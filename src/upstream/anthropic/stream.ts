// Reading an Anthropic Messages event stream: every event parsed, `error` events and streams
// that stop before `message_stop` turned into UpstreamError, the silence timer paused while the
// consumer handles an event, and caller aborts kept as aborts.
import { UpstreamError, type UpstreamFailureKind } from '../port.ts';
import { asUpstreamFailure, errorDetail, type Deadline, type UpstreamResponse } from '../upstream-http.ts';
import { readSse } from '../sse.ts';
import { isObject, type Json } from './json.ts';

export interface AnthropicEvent {
  /** The SSE event name (data.type when the upstream named none). */
  name: string;
  /** What the event is: its data.type, else its SSE name. */
  type: string;
  /** The data line exactly as received. */
  data: string;
  json: Json;
}

export interface EventStreamOptions {
  op: string;
  signal: AbortSignal;
  deadline: Deadline;
  secrets: readonly string[];
}

// Anthropic's error types (in `error` events and error bodies) by what they mean for the gateway.
const REQUEST_ERRORS = new Set(['invalid_request_error', 'request_too_large']);
const CONFIG_ERRORS = new Set(['authentication_error', 'permission_error', 'not_found_error', 'billing_error']);

/** The failure kind of an Anthropic error type: the upstream's own trouble unless it blames the request or the key. */
export function errorKindOf(type: unknown): UpstreamFailureKind {
  if (typeof type === 'string' && REQUEST_ERRORS.has(type)) return 'request';
  if (typeof type === 'string' && CONFIG_ERRORS.has(type)) return 'config';
  return 'retriable';
}

/**
 * The events of a 2xx streaming response, up to and including `message_stop` (reading stops
 * there). Throws UpstreamError on an error event, malformed data or a stream that ends early;
 * a caller abort surfaces as the abort error. The deadline is cleared when this ends.
 */
export async function* anthropicEvents(response: UpstreamResponse, options: EventStreamOptions): AsyncGenerator<AnthropicEvent> {
  const { op, signal, deadline, secrets } = options;
  try {
    if (!(response.headers.get('content-type') ?? '').includes('text/event-stream')) {
      throw new UpstreamError(`upstream ${op} did not answer with an event stream`);
    }
    let finished = false;
    for await (const sse of readSse(response.body, () => deadline.touch())) {
      const json = parseEvent(sse.data, op);
      const type = typeof json.type === 'string' ? json.type : sse.event;
      if (type === 'error' || sse.event === 'error') {
        const error = isObject(json.error) ? json.error : {};
        throw new UpstreamError(`upstream ${op} failed: ${errorDetail(json, secrets) || 'error event'}`, undefined, errorKindOf(error.type));
      }
      const name = sse.event === 'message' && typeof json.type === 'string' ? json.type : sse.event;
      // The silence timer must not run while a slow client is consuming what we yield.
      deadline.clear();
      yield { name, type, data: sse.data, json };
      deadline.touch();
      if (type === 'message_stop') {
        finished = true;
        break;
      }
    }
    if (!finished) throw new UpstreamError(`upstream ${op} ended before it finished`);
  } catch (error) {
    throw asUpstreamFailure(error, op, signal, deadline);
  } finally {
    deadline.clear();
  }
}

function parseEvent(data: string, op: string): Json {
  try {
    const json: unknown = JSON.parse(data);
    if (isObject(json)) return json;
  } catch {
    // fall through
  }
  throw new UpstreamError(`upstream ${op} sent a malformed event`);
}
