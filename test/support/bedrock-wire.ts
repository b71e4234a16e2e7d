// What is Bedrock Runtime's own on the wire, for the Bedrock double (bedrock-double.ts), read from
// the official client's code (@aws-sdk/client-bedrock-runtime 3.1164 with @smithy/core 3.41 and
// @aws-sdk/core's AwsRestJsonProtocol):
// - Errors: the HTTP status, the type in the `x-amzn-errortype` header (`Type:namespace`, the SDK
//   keeps what comes before the colon) and a JSON body {"message": …}; the SDK throws its class for
//   a modeled type (ThrottlingException…) and a BedrockRuntimeServiceException named after the type
//   otherwise (UnrecognizedClientException, InvalidSignatureException).
// - ConverseStream's body: application/vnd.amazon.eventstream, binary frames (total length, headers
//   length, prelude CRC, headers, payload, CRC) encoded with @smithy/core's EventStreamCodec. An
//   event carries `:message-type: event`, `:event-type` (the union member: messageStart,
//   contentBlockDelta…) and `:content-type: application/json`, its payload the member's JSON plus
//   Bedrock's `p` padding (a prefix of the alphabet of varying length, which the SDK ignores); an
//   in-stream error is `:message-type: exception` with `:exception-type` (throttlingException,
//   modelStreamErrorException…) and {"message": …}.
// - SigV4 (service `bedrock`): the double recomputes the signature with @smithy/signature-v4 from
//   the secret it knows and the headers the client says it signed (`:authority` over HTTP/2,
//   `host` over HTTP/1.1), the payload hash being that of the body received.
import { createHash, createHmac, timingSafeEqual, type Hash, type Hmac } from 'node:crypto';
import { EventStreamCodec } from '@smithy/core/event-streams';
import { SignatureV4 } from '@smithy/signature-v4';

export interface BedrockError {
  status: number;
  type: string;
  message: string;
}

/** The access key pair the double accepts unless given others (shaped like AWS's: AKIA + 16, 40 characters). */
export const BEDROCK_ACCESS_KEY_ID = 'AKIATOLLGATEDOUBLE01';
export const BEDROCK_SECRET_ACCESS_KEY = 'tollgate+Bedrock/Double/Secret0123456789';
export const BEDROCK_REGION = 'us-east-1';

const SERVICE = 'bedrock';
const CORAL_NS = 'http://internal.amazon.com/coral/com.amazon.coral.service/';
const BEDROCK_NS = 'http://internal.amazon.com/coral/com.amazon.bedrock/';
/** Errors raised by AWS's front door (authentication) rather than by Bedrock. */
const CORAL_TYPES = new Set([
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'MissingAuthenticationTokenException',
  'IncompleteSignatureException',
]);

/** Bedrock's error for each status a fault may inject (the SDK's modeled exceptions and their statuses). */
export const BEDROCK_STATUS_ERRORS: Readonly<Record<number, readonly [string, string]>> = {
  400: ['ValidationException', 'Malformed input request, please reformat your input and try again.'],
  403: ['AccessDeniedException', "You don't have access to the model with the specified model ID."],
  404: ['ResourceNotFoundException', 'This model version has reached the end of its life. Please refer to the AWS documentation for more details.'],
  408: ['ModelTimeoutException', 'Model has timed out in processing the request. Try your request again.'],
  424: ['ModelErrorException', 'The model produced an error while processing the request. Try your request again.'],
  429: ['ThrottlingException', 'Too many requests, please wait before trying again.'],
  500: ['InternalServerException', 'The system encountered an unexpected error during processing. Try your request again.'],
  503: ['ServiceUnavailableException', 'Bedrock is unable to process your request.'],
};

export function bedrockErrorFor(status: number, message?: string): BedrockError {
  const [type, text] = BEDROCK_STATUS_ERRORS[status] ?? (status >= 500 ? BEDROCK_STATUS_ERRORS[500]! : BEDROCK_STATUS_ERRORS[400]!);
  return { status, type, message: message ?? text };
}

export const validationError = (message: string): BedrockError => ({ status: 400, type: 'ValidationException', message });

/** The response headers that name an error's type, as AWS sends them. */
export function errorTypeHeader(type: string): Record<string, string> {
  return { 'x-amzn-errortype': `${type}:${CORAL_TYPES.has(type) ? CORAL_NS : BEDROCK_NS}` };
}

// ---- Event stream frames ----------------------------------------------------------------------

const codec = new EventStreamCodec(
  (bytes) => Buffer.from(bytes).toString('utf8'),
  (text) => new Uint8Array(Buffer.from(text, 'utf8')),
);
const PADDING = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const str = (value: string) => ({ type: 'string' as const, value });

/** One event of a ConverseStream body; `n` varies the padding's length as Bedrock's does. */
export function eventFrame(eventType: string, payload: Record<string, unknown>, n: number): Uint8Array {
  const body = JSON.stringify({ ...payload, p: PADDING.slice(0, 1 + ((n * 7) % PADDING.length)) });
  return codec.encode({
    headers: { ':event-type': str(eventType), ':content-type': str('application/json'), ':message-type': str('event') },
    body: new Uint8Array(Buffer.from(body, 'utf8')),
  });
}

/** The in-stream exceptions ConverseStream's union has, by the name its frames carry. */
export type BedrockStreamException =
  'internalServerException' | 'modelStreamErrorException' | 'validationException' | 'throttlingException' | 'serviceUnavailableException';

const STREAM_EXCEPTION_MESSAGES: Record<BedrockStreamException, Record<string, unknown>> = {
  internalServerException: { message: BEDROCK_STATUS_ERRORS[500]![1] },
  modelStreamErrorException: { message: 'The model stream encountered an error.', originalStatusCode: 500, originalMessage: 'Internal server error' },
  validationException: { message: 'Malformed input request, please reformat your input and try again.' },
  throttlingException: { message: BEDROCK_STATUS_ERRORS[429]![1] },
  serviceUnavailableException: { message: BEDROCK_STATUS_ERRORS[503]![1] },
};

/** An exception frame ending a stream that had started (HTTP 200 already sent). */
export function exceptionFrame(type: BedrockStreamException): Uint8Array {
  return codec.encode({
    headers: { ':exception-type': str(type), ':content-type': str('application/json'), ':message-type': str('exception') },
    body: new Uint8Array(Buffer.from(JSON.stringify(STREAM_EXCEPTION_MESSAGES[type]), 'utf8')),
  });
}

/** A frame whose prelude checksum is wrong: the SDK's decoder refuses it (a garbled stream). */
export function corruptFrame(): Uint8Array {
  const frame = eventFrame('messageStart', { role: 'assistant' }, 0);
  frame[9] = frame[9]! ^ 0xff;
  return frame;
}

// ---- SigV4 ------------------------------------------------------------------------------------

/** Node's SHA-256 (and HMAC-SHA256 with a secret) in the shape the smithy signer takes. */
class NodeSha256 {
  readonly #hash: Hash | Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.#hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytesOf(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.#hash.update(bytesOf(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }
}

function bytesOf(data: string | ArrayBuffer | ArrayBufferView): Buffer {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.from(data);
}

export interface SigningIdentity {
  accessKeyId: string;
  secretAccessKey: string;
  /** When set, requests must carry it in x-amz-security-token (temporary credentials). */
  sessionToken?: string;
  region: string;
}

export interface ReceivedRequest {
  method: string;
  /** The path and query exactly as received. */
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

const AUTHORIZATION =
  /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/(\d{8})\/([^/,\s]+)\/([^/,\s]+)\/aws4_request,\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$/;
const SKEW_MS = 15 * 60_000;

const coral = (type: string, message: string): BedrockError => ({ status: 403, type, message });
const BAD_SIGNATURE =
  'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.';

/** Why AWS would refuse the request's signature, or null when it is right. */
export async function sigV4Problem(req: ReceivedRequest, id: SigningIdentity, now = Date.now()): Promise<BedrockError | null> {
  const header = (name: string) => {
    const value = req.headers[name];
    return Array.isArray(value) ? value.join(',') : value;
  };
  const authorization = header('authorization');
  if (!authorization) return coral('MissingAuthenticationTokenException', 'Missing Authentication Token');
  const parts = AUTHORIZATION.exec(authorization);
  if (!parts) return coral('IncompleteSignatureException', `Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.`);
  const [, keyId, day, region, service, signedList, signature] = parts as unknown as string[];
  if (keyId !== id.accessKeyId || header('x-amz-security-token') !== id.sessionToken)
    return coral('UnrecognizedClientException', 'The security token included in the request is invalid.');
  if (service !== SERVICE) return coral('InvalidSignatureException', `Credential should be scoped to correct service: '${SERVICE}'.`);
  if (region !== id.region) return coral('InvalidSignatureException', `Credential should be scoped to a valid region.`);
  const amzDate = header('x-amz-date') ?? '';
  const date = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (!date) return coral('IncompleteSignatureException', "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.");
  const signedAt = Date.UTC(+date[1]!, +date[2]! - 1, +date[3]!, +date[4]!, +date[5]!, +date[6]!);
  if (amzDate.slice(0, 8) !== day)
    return coral(
      'InvalidSignatureException',
      `Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '${day}' != '${amzDate.slice(0, 8)}'`,
    );
  if (Math.abs(now - signedAt) > SKEW_MS)
    return coral('InvalidSignatureException', `Signature expired: ${amzDate} is now earlier than the allowed 15 minutes.`);

  const names = signedList!.split(';');
  const headers: Record<string, string> = {};
  for (const name of names) {
    const value = header(name);
    if (value === undefined) return coral('InvalidSignatureException', BAD_SIGNATURE);
    headers[name] = value;
  }
  // The payload's hash is recomputed from what arrived, so a body changed on the way fails too.
  if ('x-amz-content-sha256' in headers) headers['x-amz-content-sha256'] = createHash('sha256').update(req.body).digest('hex');
  const [path, search = ''] = req.url.split('?') as [string, string?];
  const query: Record<string, string | string[]> = {};
  for (const [name, value] of new URLSearchParams(search)) {
    const before = query[name];
    query[name] = before === undefined ? value : [...(Array.isArray(before) ? before : [before]), value];
  }
  const signer = new SignatureV4({
    credentials: { accessKeyId: id.accessKeyId, secretAccessKey: id.secretAccessKey },
    region: id.region,
    service: SERVICE,
    sha256: NodeSha256,
    applyChecksum: false,
  });
  const signed = await signer.sign(
    { method: req.method, protocol: 'http:', hostname: 'double', path, query, headers, body: req.body },
    { signingDate: new Date(signedAt) },
  );
  const expected = /Signature=([0-9a-f]{64})$/.exec(String(signed.headers.authorization))?.[1] ?? '';
  const same = expected.length === signature!.length && timingSafeEqual(Buffer.from(expected), Buffer.from(signature!));
  return same ? null : coral('InvalidSignatureException', BAD_SIGNATURE);
}
