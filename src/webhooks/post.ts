// One delivery attempt: a POST of the notification to the webhook's URL, connecting only to
// addresses the endpoint rules allow (checked inside the connection's own DNS lookup), with a time
// limit, no redirects followed, and the response body read (bounded) and dropped.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connectLookup, isBlockedAddressError, type EndpointPolicy } from './endpoint.ts';

export interface PostResult {
  /** The HTTP status, or null when no response came. */
  status: number | null;
  /** Why the attempt failed (null when the receiver answered 2xx). Never holds a header or the body. */
  error: string | null;
}

const MAX_RESPONSE_BYTES = 64 * 1024;

export interface PostOptions {
  policy: EndpointPolicy;
  timeoutMs: number;
  /** Aborts the attempt (shutdown): the delivery stays pending, as if never tried. */
  signal?: AbortSignal;
  /** Extra trusted CA certificates (tests); the system CAs otherwise. */
  ca?: string | Buffer;
}

export function postNotification(rawUrl: string, body: string, headers: Record<string, string>, opts: PostOptions): Promise<PostResult> {
  const url = new URL(rawUrl);
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  const deadline = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
  return new Promise<PostResult>((resolve) => {
    let settled = false;
    const done = (r: PostResult) => {
      if (!settled) {
        settled = true;
        resolve(r);
      }
    };
    const req = request(
      url,
      {
        method: 'POST',
        signal,
        agent: false,
        lookup: connectLookup(url, opts.policy),
        ca: opts.ca,
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'tollgate-webhooks/1' },
      },
      (res: IncomingMessage) => {
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) res.destroy();
        });
        const status = res.statusCode ?? 0;
        const finish = () =>
          done({
            status,
            error: status >= 200 && status < 300 ? null : status >= 300 && status < 400 ? `HTTP ${status} (redirects are not followed)` : `HTTP ${status}`,
          });
        res.on('end', finish);
        res.on('close', finish);
        res.on('error', finish);
      },
    );
    req.on('error', (err: Error & { code?: string }) => {
      if (isBlockedAddressError(err)) return done({ status: null, error: 'the host resolves to an address that is not allowed' });
      if (deadline.aborted) return done({ status: null, error: `no answer within ${opts.timeoutMs} ms` });
      if (opts.signal?.aborted) return done({ status: null, error: 'aborted' });
      done({ status: null, error: err.code ? `connection failed (${err.code})` : 'connection failed' });
    });
    req.end(body);
  });
}
