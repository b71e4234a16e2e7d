// The native AWS Bedrock provider, through the official @aws-sdk/client-bedrock-runtime:
// Converse and ConverseStream, signed with SigV4 by the client, usage read in full (cache reads
// and writes), Titan embeddings through InvokeModel. Callers of every dialect (chat completions,
// Messages, Responses) are translated to the canonical call.
import { BedrockRuntimeClient } from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { UpstreamError, type ImageOutcome, type Provider } from '../port.ts';
import { chat, chatStream, type BedrockTarget } from './chat.ts';
import { embed } from './embeddings.ts';

export interface BedrockOptions {
  /** The AWS region, e.g. us-east-1. */
  region: string;
  /** The runtime endpoint; default the region's (https://bedrock-runtime.{region}.amazonaws.com). */
  endpoint?: string;
  /** Static credentials; without them the SDK's default chain (environment, profile, role) is used. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Longest silence accepted between stream events. */
  timeoutMs?: number;
  /** Longest wait from sending the request to the response's headers; default timeoutMs. */
  firstByteTimeoutMs?: number;
}

// Reasoning models can think for minutes before their first token.
const DEFAULT_TIMEOUT_MS = 600_000;

/**
 * The client: one attempt per call (the gateway's failover does the retrying), over HTTP/1.1
 * keep-alive like the other upstreams (the SDK's HTTP/2 default is for the bidirectional streams
 * the gateway does not use, and Converse and ConverseStream are served over both).
 */
export function bedrockClient(options: BedrockOptions): BedrockRuntimeClient {
  return new BedrockRuntimeClient({
    region: options.region,
    ...(options.endpoint !== undefined && { endpoint: options.endpoint }),
    ...(options.credentials !== undefined && { credentials: options.credentials }),
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler(),
  });
}

export function createBedrockProvider(options: BedrockOptions): Provider {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const c = options.credentials;
  const target: BedrockTarget = {
    client: bedrockClient(options),
    secrets: c ? [c.accessKeyId, c.secretAccessKey, ...(c.sessionToken ? [c.sessionToken] : [])] : [],
    timeoutMs,
    firstByteTimeoutMs: options.firstByteTimeoutMs ?? timeoutMs,
  };
  return {
    name: 'bedrock',
    images: false,
    chat: (call) => chat(target, call),
    chatStream: (call) => chatStream(target, call),
    embed: (call) => embed(target, call),
    image: (): Promise<ImageOutcome> => Promise.reject(new UpstreamError('bedrock upstreams make no images here', undefined, 'config')),
  };
}
