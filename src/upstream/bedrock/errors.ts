// What the Bedrock runtime client throws, as the gateway's failures. Bedrock names its errors
// (x-amzn-errortype, or an exception event inside a stream): a ValidationException is the
// caller's request (400), the credential and access errors are the operator's (502, next
// channel), throttling, capacity and the model's own failures are retriable (failover). Every
// detail is redacted of the credentials and the caller's texts.
import { BedrockRuntimeServiceException } from '@aws-sdk/client-bedrock-runtime';
import { UpstreamError, type UpstreamFailureKind } from '../port.ts';
import { errorDetail } from '../upstream-http.ts';

const CALLER = new Set(['ValidationException']);
const OPERATOR = new Set([
  'AccessDeniedException',
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'ExpiredTokenException',
  'IncompleteSignatureException',
  'MissingAuthenticationTokenException',
  'ResourceNotFoundException',
]);
const RETRIABLE = new Set([
  'ThrottlingException',
  'ServiceUnavailableException',
  'InternalServerException',
  'ModelTimeoutException',
  'ModelNotReadyException',
  'ModelErrorException',
  'ModelStreamErrorException',
  'ServiceQuotaExceededException',
]);

function kindOf(name: string): UpstreamFailureKind | undefined {
  if (CALLER.has(name)) return 'request';
  if (OPERATOR.has(name)) return 'config';
  if (RETRIABLE.has(name)) return 'retriable';
  return undefined;
}

/**
 * The failure a client error means; undefined for the rest (aborts, broken connections), which
 * the shared HTTP plumbing maps.
 */
export function bedrockFailureOf(error: unknown, op: string, secrets: readonly string[]): UpstreamError | undefined {
  if (error instanceof UpstreamError) return error;
  if (error instanceof BedrockRuntimeServiceException) {
    const status = error.$metadata?.httpStatusCode;
    const detail = errorDetail({ error: { message: error.message, code: error.name } }, secrets);
    const at = status !== undefined ? `HTTP ${status}` : 'an error event';
    return new UpstreamError(`upstream ${op} failed with ${at}${detail ? `: ${detail}` : ''}`, status, kindOf(error.name));
  }
  // A reply the client could not parse (garbage, a frame with a bad checksum).
  if (error instanceof SyntaxError || (error instanceof Error && /deserializ|checksum|prelude/i.test(error.message)))
    return new UpstreamError(`upstream ${op} returned a malformed reply`);
  return undefined;
}
