// What the AzureOpenAI client throws, as the gateway's failures: Azure's content filter refusing
// the prompt is the caller's 400 (never retried), 429 and 5xx, timeouts, garbage and broken
// connections are retriable (failover), 401/403/404 are the operator's. Every detail is
// redacted of the key and the caller's texts.
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { UpstreamError } from '../port.ts';
import { errorDetail } from '../upstream-http.ts';
import { upstreamErrorOf } from '../openai/errors.ts';
import { isObject } from '../openai/json.ts';

/** Azure's code for a prompt (or a completion) its content filter refused. */
export const CONTENT_FILTER_CODE = 'content_filter';

/** The filter categories Azure flagged (hate, sexual, violence, self_harm, jailbreak, ...), from its innererror. */
function filteredCategories(error: unknown): string[] {
  const inner = isObject(error) && isObject(error.innererror) ? error.innererror : undefined;
  const result = inner && isObject(inner.content_filter_result) ? inner.content_filter_result : {};
  return Object.entries(result)
    .filter(([, verdict]) => isObject(verdict) && (verdict.filtered === true || verdict.detected === true))
    .map(([category]) => category);
}

/** The refusal as the caller reads it (inside the gateway's 400, in the caller's dialect). */
function contentFiltered(op: string, error: unknown, status: number | undefined): UpstreamError {
  const categories = filteredCategories(error);
  const flagged = categories.length > 0 ? ` (flagged: ${categories.join(', ')})` : '';
  return new UpstreamError(`upstream ${op} was refused by Azure OpenAI's content filter${flagged}; rephrase the prompt`, status ?? 400, 'request');
}

/**
 * What the client's own errors mean: an HTTP error status (the content filter's refusal among
 * them), an error event inside a stream, a body that does not parse, the client's own timeout.
 * Undefined for the rest (aborts, broken connections), which the shared HTTP plumbing maps.
 */
export function azureFailureOf(error: unknown, op: string, secrets: readonly string[]): UpstreamError | undefined {
  if (error instanceof UpstreamError) return error;
  if (error instanceof APIConnectionTimeoutError) return new UpstreamError(`upstream ${op} timed out`);
  if (error instanceof APIError && !(error instanceof APIUserAbortError) && !(error instanceof APIConnectionError)) {
    if (error.code === CONTENT_FILTER_CODE) return contentFiltered(op, error.error, error.status);
    // No status: an error event inside a 2xx stream.
    if (error.status === undefined) return upstreamErrorOf(op, error.error, secrets);
    const detail = errorDetail({ error: error.error }, secrets);
    return new UpstreamError(`upstream ${op} failed with HTTP ${error.status}${detail ? `: ${detail}` : ''}`, error.status);
  }
  // A body the client could not parse (garbage, half a JSON document): the upstream's fault.
  if (error instanceof SyntaxError) return new UpstreamError(`upstream ${op} returned a malformed reply`);
  return undefined;
}

/** The network failure behind a client's connection error (its cause carries the system code). */
export const networkCause = (error: unknown): unknown => (error instanceof APIConnectionError && error.cause ? error.cause : error);
