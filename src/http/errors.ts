// Every failure leaves as OpenAI's error shape {"error":{"message","type","param","code"}}.
import type { Context, Next } from 'koa';
import { DomainError } from '../ledger/errors.ts';
import { UpstreamError } from '../upstream/port.ts';
import { InvalidImageError } from '../upstream/image-error.ts';
import { ReadModelsBehind } from '../ledger/read-your-writes.ts';
import { LogNotReadableYet, WrongExpectedRevisionError } from '../eventstore/errors.ts';
import { isDatabaseUnavailable } from '../eventstore/db.ts';
import type { RateDecision } from '../ledger/call-rate.ts';
import { seconds } from './rate-limit.ts';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly code: string | null = null,
    readonly param: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const badRequest = (message: string, param: string | null = null, code: string | null = 'invalid_value') =>
  new ApiError(400, message, 'invalid_request_error', code, param);

export function insufficientQuota(facts: Record<string, unknown>): ApiError {
  const hint =
    facts.planActive === false
      ? 'Your main plan has expired or is not active: renew the plan, or add extra tokens.'
      : 'Your main plan quota is used up: add extra tokens (they do not change your call rate), or renew/upgrade the plan.';
  const needed = facts.needed !== undefined ? ` This call needs at least ${facts.needed} tokens; ${facts.available ?? 0} are available.` : '';
  return new ApiError(402, `You exceeded your current quota.${needed} ${hint}`, 'insufficient_quota', 'insufficient_quota');
}

/** A hold that does not fit in the key's own spend limit: the limit, the period's spend and when it resets. */
export function keyLimitExceeded(facts: Record<string, unknown>): ApiError {
  const period = facts.period as string;
  const per = period === 'none' ? 'in all' : `per ${period === 'daily' ? 'day' : period === 'weekly' ? 'week (from Monday)' : 'month'} (UTC)`;
  const needed =
    facts.needed !== undefined
      ? ` This call needs at least ${facts.needed} tokens; ${facts.available ?? 0} are left within the limit (${facts.spent ?? 0} spent, ${facts.reserved ?? 0} held by calls in flight).`
      : '';
  const reset = facts.resetsAt ? ` The limit resets at ${facts.resetsAt}.` : " The limit does not reset: ask the account's operator to raise it.";
  return new ApiError(
    402,
    `This API key's spend limit of ${facts.limit} billed tokens ${per} is reached.${needed}${reset}`,
    'insufficient_quota',
    'key_limit_exceeded',
  );
}

/** A key past its expiry time. */
export function keyExpiredError(expiresAt: string | null): ApiError {
  return new ApiError(
    401,
    `This API key expired${expiresAt ? ` at ${expiresAt}` : ''}. Ask the account's operator for a new key.`,
    'invalid_request_error',
    'key_expired',
  );
}

export function rateLimitError(d: RateDecision): ApiError {
  const retry = Math.max(1, Math.ceil(d.retryAfterMs / 1000));
  return new ApiError(
    429,
    `Rate limit reached: your plan allows ${d.limit} requests per minute. Retry after ${retry}s.`,
    'requests',
    'rate_limit_exceeded',
    null,
    {
      'retry-after': String(retry),
      'x-ratelimit-limit-requests': String(d.limit),
      'x-ratelimit-remaining-requests': '0',
      'x-ratelimit-reset-requests': seconds(d.resetMs),
    },
  );
}

export function modelNotFound(model: string | null, baseUrl: string): ApiError {
  return new ApiError(
    403,
    `The model ${model === null ? 'requested' : `'${model}'`} does not exist or is not enabled in your plan. Call GET ${baseUrl}/models and use an id from it.`,
    'invalid_request_error',
    'model_not_found',
    'model',
  );
}

/** How long a caller is told to wait when the ledger's database is out of reach (a failover takes seconds). */
export const DATABASE_RETRY_AFTER_S = 2;

/** The ledger's database cannot be reached (cut, stalled, failing over): try again shortly, nothing was charged. */
export function databaseUnavailable(): ApiError {
  return new ApiError(
    503,
    `The billing ledger is unreachable for a moment; nothing was charged. Retry in ${DATABASE_RETRY_AFTER_S} seconds.`,
    'server_error',
    'ledger_unavailable',
    null,
    { 'retry-after': String(DATABASE_RETRY_AFTER_S) },
  );
}

/** Maps any thrown value to an ApiError; unknown failures become a 500 without internals. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof DomainError) {
    const param = (err.facts.param as string | undefined) ?? null;
    switch (err.code) {
      case 'insufficient_quota':
        return insufficientQuota(err.facts);
      case 'key_limit_exceeded':
        return keyLimitExceeded(err.facts);
      case 'key_expired':
        return keyExpiredError(typeof err.facts.expiresAt === 'string' ? err.facts.expiresAt : null);
      case 'rate_limited':
        return rateLimitError(err.facts as unknown as RateDecision);
      case 'account_suspended':
        return new ApiError(403, `${err.message}; it is lifted when the dispute closes.`, 'permission_error', 'account_suspended');
      case 'forbidden':
        return new ApiError(403, err.message, 'permission_error', 'forbidden', param);
      case 'not_found':
        return new ApiError(404, err.message, 'invalid_request_error', 'not_found', param);
      case 'already_exists':
        return new ApiError(409, err.message, 'invalid_request_error', 'already_exists', param);
      case 'conflict':
        return new ApiError(409, err.message, 'invalid_request_error', 'conflict', param);
      // Routes check the plan first with the absolute {base_url}; this covers a plan changed mid-call.
      case 'model_not_enabled':
        return modelNotFound(typeof err.facts.model === 'string' ? err.facts.model : null, '/v1');
      default:
        return new ApiError(400, err.message, 'invalid_request_error', 'invalid_value', param);
    }
  }
  if (err instanceof LogNotReadableYet) {
    return new ApiError(
      503,
      'The event log is still committing earlier writes; nothing was changed. Retry in a second.',
      'server_error',
      'log_not_readable',
      null,
      {
        'retry-after': '1',
      },
    );
  }
  // Another writer (a second gateway) won the account's stream on every attempt: this request's
  // decision was never written (a call's hold is left to the sweeper), and the same request shortly goes through.
  if (err instanceof WrongExpectedRevisionError) {
    return new ApiError(
      503,
      'Other requests kept updating the same account at this moment; this one changed nothing. Retry in a second.',
      'server_error',
      'ledger_contended',
      null,
      { 'retry-after': '1' },
    );
  }
  if (isDatabaseUnavailable(err)) return databaseUnavailable();
  if (err instanceof ReadModelsBehind) {
    return new ApiError(
      503,
      'Your latest changes are still being recorded; nothing was changed. Retry in a second.',
      'server_error',
      'read_model_behind',
      null,
      { 'retry-after': '1' },
    );
  }
  if (err instanceof InvalidImageError) return badRequest(err.message, 'image', 'invalid_image');
  if (err instanceof UpstreamError) {
    // The upstream refused the request itself (its detail is redacted of keys and prompt text).
    if (err.kind === 'request')
      return new ApiError(
        400,
        `The upstream model provider refused the request; nothing was charged. ${err.message}`,
        'invalid_request_error',
        'upstream_rejected_request',
      );
    return new ApiError(502, 'The upstream model provider failed; nothing was charged. Try again.', 'upstream_error', 'upstream_error');
  }
  const bodyError = requestBodyError(err);
  if (bodyError) return bodyError;
  const e = err as { status?: number; statusCode?: number; expose?: boolean; message?: string; type?: string };
  const status = e.status ?? e.statusCode;
  if (status === 413 || e.type === 'entity.too.large') return new ApiError(413, 'Request body too large.', 'invalid_request_error', 'request_too_large');
  if (status === 405) return new ApiError(405, `Method not allowed${e.message ? `: ${e.message}` : ''}.`, 'invalid_request_error', 'method_not_allowed');
  if (status === 415) return new ApiError(415, e.message ?? 'Unsupported media type.', 'invalid_request_error', 'unsupported_media_type');
  if (status && status >= 400 && status < 500) {
    const message =
      e.type === 'entity.parse.failed' || /JSON/i.test(e.message ?? '')
        ? 'The request body is not valid JSON.'
        : e.expose
          ? (e.message ?? 'Bad request.')
          : 'Bad request.';
    return new ApiError(status, message, 'invalid_request_error', status === 400 ? 'invalid_json' : null);
  }
  return new ApiError(500, 'The server had an error processing your request; nothing was charged.', 'server_error', 'server_error');
}

// formidable's codes for a multipart body the client got wrong (the rest are server faults).
const MULTIPART_TOO_LARGE = new Set([1006, 1007, 1009, 1015, 1016]);
const MULTIPART_MALFORMED = new Set([1002, 1005, 1008, 1010, 1011, 1012, 1013, 1014]);

/**
 * The body parsers' own failures carry no HTTP status: a multipart body formidable cannot parse
 * or that exceeds its limits, and a Content-Encoding the body does not match (zlib/brotli).
 * Both are the client's fault: 400 or 413, never a 500.
 */
function requestBodyError(err: unknown): ApiError | null {
  const e = err as { code?: unknown; httpCode?: unknown; errno?: unknown; message?: string };
  if (typeof e?.code === 'number' && typeof e.httpCode === 'number') {
    if (MULTIPART_TOO_LARGE.has(e.code))
      return new ApiError(413, `The multipart body exceeds a limit: ${e.message ?? 'too large'}.`, 'invalid_request_error', 'request_too_large');
    if (MULTIPART_MALFORMED.has(e.code))
      return new ApiError(400, `The multipart/form-data body was refused: ${e.message ?? 'malformed'}.`, 'invalid_request_error', 'invalid_multipart');
    return null;
  }
  if (typeof e?.code === 'string' && typeof e.errno === 'number' && /^(Z_|ERR__ERROR|ERR_BROTLI)/.test(e.code)) {
    return new ApiError(400, 'The request body does not match its Content-Encoding.', 'invalid_request_error', 'invalid_encoding');
  }
  return null;
}

export function errorBody(e: ApiError) {
  return { error: { message: e.message, type: e.type, param: e.param, code: e.code } };
}

/** Another error shape for the paths a dialect owns (OpenAI's is the default). */
export interface ErrorShape {
  path: RegExp;
  body(e: ApiError, requestId?: string): unknown;
}

/**
 * Outermost middleware: turns exceptions into the error shape and remembers them for the log.
 * A route may set ctx.state.errorShape; failures before any route runs (a body that is not JSON,
 * too large, the wrong method) take the shape of the first `shapes` entry whose path matches.
 */
export function errorHandler(shapes: ErrorShape[] = []) {
  return async (ctx: Context, next: Next): Promise<void> => {
    try {
      await next();
    } catch (err) {
      const api = toApiError(err);
      if (api.status >= 500 && api.status !== 502) ctx.state.internalError = err;
      ctx.state.errorCode = api.code;
      if (ctx.headerSent || !ctx.writable) return;
      ctx.status = api.status;
      for (const [k, v] of Object.entries(api.headers)) ctx.set(k, v);
      const byPath = ctx.path.startsWith('/admin') ? undefined : shapes.find((s) => s.path.test(ctx.path));
      ctx.body = ctx.path.startsWith('/admin')
        ? errorBody(api)
        : (ctx.state.errorShape?.(api) ?? (byPath ? byPath.body(api, ctx.state.requestId) : errorBody(api)));
    }
  };
}
