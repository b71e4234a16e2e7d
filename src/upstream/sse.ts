// A server-sent events reader for upstream streams: events may be split across reads at any
// byte, lines may end in \n, \r\n or \r, and comment lines (": keep-alive") are ignored.
import { UpstreamError } from './port.ts';

export interface SseEvent {
  event: string;
  data: string;
}

// One event line longer than this is not a sane chat chunk; stop instead of buffering forever.
const MAX_BUFFERED_CHARS = 8 * 1024 * 1024;

/** Yields events from `body`; `onData` is called for every chunk read (to reset idle timers). */
export async function* readSse(body: AsyncIterable<Uint8Array>, onData?: () => void): AsyncGenerator<SseEvent> {
  const reader = body[Symbol.asyncIterator]();
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let data: string[] = [];
  let done = false;

  // Applies one line; returns an event when a blank line completes one.
  const line = (text: string): SseEvent | undefined => {
    if (text === '') {
      const complete = data.length > 0 ? { event: event || 'message', data: data.join('\n') } : undefined;
      event = '';
      data = [];
      return complete;
    }
    if (text.startsWith(':')) return undefined;
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    return undefined;
  };

  try {
    while (!done) {
      const read = await reader.next();
      done = read.done === true;
      buffer += done ? decoder.decode() : decoder.decode(read.value as Uint8Array, { stream: true });
      if (!done) onData?.();
      let start = 0;
      for (;;) {
        const lf = buffer.indexOf('\n', start);
        const cr = buffer.indexOf('\r', start);
        const end = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
        if (end === -1) break;
        // A \r at the very end may be the first half of \r\n still in flight.
        if (buffer[end] === '\r' && end === buffer.length - 1 && !done) break;
        const next = buffer[end] === '\r' && buffer[end + 1] === '\n' ? end + 2 : end + 1;
        const complete = line(buffer.slice(start, end));
        start = next;
        if (complete) yield complete;
      }
      buffer = buffer.slice(start);
      if (buffer.length > MAX_BUFFERED_CHARS) throw new UpstreamError('upstream stream sent an oversized line');
    }
    // Servers that close without the final blank line still meant their last event.
    if (buffer !== '') line(buffer);
    const last = line('');
    if (last) yield last;
  } finally {
    // Stops the download when the consumer quits early (client disconnect, [DONE]); a no-op
    // once the body has ended.
    if (!done) await reader.return?.()?.catch(() => undefined);
  }
}
