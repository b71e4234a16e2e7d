// Requests Node's HTTP parser refuses before Koa sees them get an answer in OpenAI's error shape.
import type { Duplex } from 'node:stream';

const CLIENT_ERRORS: Record<string, [number, string, string, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large', 'The request headers are too large (at most 16 KB in all).', 'request_headers_too_large'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Payload Too Large', 'The chunk extensions of the request body are too large.', 'request_too_large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'The request was not received in time.', 'request_timeout'],
  ERR_HTTP_HEADERS_TIMEOUT: [408, 'Request Timeout', 'The request headers were not received in time.', 'request_timeout'],
};

/**
 * Requests Node's HTTP parser refuses before Koa sees them (headers over its limit, a malformed
 * request line, a timeout) get an answer in OpenAI's error shape instead of a bare status line,
 * then the connection is closed. Never throws: the socket may already be gone.
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  try {
    // A reset connection has nobody to answer; a response already under way cannot be replaced.
    const busy = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent;
    if (err.code !== 'ECONNRESET' && socket.writable && !busy) {
      const [status, reason, message, code] = CLIENT_ERRORS[err.code ?? ''] ?? [400, 'Bad Request', 'The request is not valid HTTP/1.1.', 'invalid_request'];
      const body = JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code } });
      const head = `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
      // Destroyed once written (or soon, if the client does not read it).
      const timer = setTimeout(() => socket.destroy(), 2000);
      timer.unref();
      socket.end(head + body, () => {
        clearTimeout(timer);
        socket.destroy();
      });
      return;
    }
  } catch {
    /* the socket went away meanwhile */
  }
  socket.destroy();
}
