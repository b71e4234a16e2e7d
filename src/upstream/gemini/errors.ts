// What the @google/genai client throws, as the gateway's failures. Its ApiError carries Google's
// error body ({error:{code, message, status, details}}) as JSON text in its message. An invalid
// API key comes back as HTTP 400 (INVALID_ARGUMENT with reason API_KEY_INVALID): the operator's
// to fix, not the caller's. 429 and 5xx, timeouts, garbage and broken connections are retriable
// (failover). Every detail is redacted of the key and the caller's texts.
import { ApiError } from '@google/genai';
import { UpstreamError, type UpstreamFailureKind } from '../port.ts';
import { errorDetail } from '../upstream-http.ts';

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

// ErrorInfo reasons that mean the gateway's own credentials or project, whatever the status says.
const CREDENTIAL_REASONS = new Set(['API_KEY_INVALID', 'API_KEY_SERVICE_BLOCKED', 'SERVICE_DISABLED', 'CONSUMER_INVALID', 'ACCESS_TOKEN_TYPE_UNSUPPORTED']);

/** Google's error object inside the ApiError's message (the JSON after any prefix), if it parses. */
function googleError(message: string): Json | undefined {
  const start = message.indexOf('{');
  if (start === -1) return undefined;
  try {
    const body: unknown = JSON.parse(message.slice(start));
    return isObject(body) && isObject(body.error) ? body.error : undefined;
  } catch {
    return undefined;
  }
}

function reasonsOf(error: Json): string[] {
  const details = Array.isArray(error.details) ? error.details : [];
  return details.filter(isObject).flatMap((d) => (typeof d.reason === 'string' ? [d.reason] : []));
}

/** 'config' when Google names the credentials whatever the status; otherwise the status decides. */
function kindOf(error: Json | undefined): UpstreamFailureKind | undefined {
  if (error && reasonsOf(error).some((reason) => CREDENTIAL_REASONS.has(reason))) return 'config';
  if (error?.status === 'UNAUTHENTICATED' || error?.status === 'PERMISSION_DENIED') return 'config';
  return undefined;
}

/**
 * The failure a client error means; undefined for the rest (aborts, broken connections), which
 * the shared HTTP plumbing maps.
 */
export function geminiFailureOf(error: unknown, op: string, secrets: readonly string[]): UpstreamError | undefined {
  if (error instanceof UpstreamError) return error;
  if (error instanceof ApiError) {
    const google = googleError(error.message);
    const detail = google ? errorDetail({ error: { message: google.message, code: google.status } }, secrets) : '';
    return new UpstreamError(`upstream ${op} failed with HTTP ${error.status}${detail ? `: ${detail}` : ''}`, error.status, kindOf(google));
  }
  // A body or stream chunk the client could not parse, or a stream cut in the middle of one.
  if (error instanceof SyntaxError || (error instanceof Error && /stream chunk|Incomplete JSON/i.test(error.message)))
    return new UpstreamError(`upstream ${op} returned a malformed reply`);
  return undefined;
}

/** The network failure behind fetch's TypeError (its cause carries the system code). */
export const networkCause = (error: unknown): unknown => (error instanceof TypeError && error.cause ? error.cause : error);
