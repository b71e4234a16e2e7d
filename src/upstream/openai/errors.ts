// OpenAI error objects met inside a 2xx reply (a chat chunk's `error`, a Responses `error` or
// `response.failed` event) as UpstreamError. HTTP error statuses are mapped by `send`.
import { UpstreamError, type UpstreamFailureKind } from '../port.ts';
import { errorDetail } from '../upstream-http.ts';
import { isObject } from './json.ts';

// Codes that say the request itself was refused (Responses' ResponseErrorCode and the usual
// chat codes); anything else is the upstream's own trouble and worth another try.
const REQUEST_CODE = /^(invalid_|unsupported_|empty_)|image|context_length_exceeded|content_policy|content_filter|string_above_max_length/;
const CONFIG_CODES = new Set(['invalid_api_key', 'insufficient_quota', 'model_not_found', 'unsupported_country_region_territory']);

/** What an OpenAI error object means for the gateway: retriable unless it blames the request (or the key). */
export function errorKindOf(error: unknown): UpstreamFailureKind {
  if (!isObject(error)) return 'retriable';
  const code = typeof error.code === 'string' ? error.code : '';
  const type = typeof error.type === 'string' ? error.type : '';
  if (CONFIG_CODES.has(code) || type === 'authentication_error' || type === 'permission_error') return 'config';
  if (type === 'invalid_request_error' || REQUEST_CODE.test(code)) return 'request';
  return 'retriable';
}

/** An UpstreamError for an error object that arrived in a 2xx reply; its detail is redacted. */
export function upstreamErrorOf(op: string, error: unknown, secrets: readonly string[]): UpstreamError {
  const detail = errorDetail({ error }, secrets);
  return new UpstreamError(`upstream ${op} failed: ${detail || 'error event'}`, undefined, errorKindOf(error));
}
