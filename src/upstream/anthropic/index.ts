// The native Anthropic provider: Messages API over the shared upstream HTTP plumbing.
// Callers of other dialects are translated (chat, chatStream); Messages callers pass through
// (`native`), and count_tokens is answered by the upstream itself.
import { UpstreamError, type ChatCall, type ImageOutcome, type Provider } from '../port.ts';
import type { UpstreamTarget } from '../upstream-http.ts';
import { chat, chatStream } from './chat.ts';
import { createNativeMessages } from './native.ts';
import { anthropicApi, type MessagesEndpoint } from './endpoint.ts';
import { DEFAULT_STRUCTURED_OUTPUT_MODELS } from './structured.ts';

export interface AnthropicOptions {
  /** The origin, e.g. https://api.anthropic.com (a trailing /v1 is tolerated); /v1/messages is appended. */
  baseURL: string;
  apiKey: string;
  /** The anthropic-version header. */
  version?: string;
  /** Longest silence accepted once a response has begun (between stream events). */
  timeoutMs?: number;
  /** Longest wait for the connection; default timeoutMs. */
  connectTimeoutMs?: number;
  /** Longest wait from sending the request to the response's status line; default timeoutMs. */
  firstByteTimeoutMs?: number;
  /**
   * Upstream models that take a strict response_format as Anthropic's structured output
   * (output_config.format); other models, and non-strict schemas, get a forced tool. Default
   * DEFAULT_STRUCTURED_OUTPUT_MODELS.
   */
  structuredOutputModels?: readonly string[];
}

export const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';
// Anthropic's own SDKs wait up to 10 minutes for a non-streamed reply; so do we.
export const DEFAULT_TIMEOUT_MS = 600_000;

export function createAnthropicProvider(options: AnthropicOptions): Provider {
  const target: UpstreamTarget = {
    baseURL: options.baseURL.replace(/\/+$/, '').replace(/\/v1$/, ''),
    apiKey: options.apiKey,
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    connectTimeoutMs: options.connectTimeoutMs,
    firstByteTimeoutMs: options.firstByteTimeoutMs,
    headers: { 'x-api-key': options.apiKey, 'anthropic-version': options.version ?? DEFAULT_ANTHROPIC_VERSION },
  };
  return messagesProvider('anthropic', anthropicApi(target), options.structuredOutputModels ?? DEFAULT_STRUCTURED_OUTPUT_MODELS);
}

/**
 * A provider that speaks Messages to `endpoint`: Anthropic's API, or a platform serving
 * Anthropic's models (Vertex AI). Callers of other dialects are translated, Messages callers
 * pass through, count_tokens is answered upstream.
 */
export function messagesProvider(name: string, endpoint: MessagesEndpoint, structuredOutputModels: readonly string[]): Provider {
  return {
    name,
    images: false,
    chat: (call: ChatCall) => chat(endpoint, call, structuredOutputModels),
    chatStream: (call: ChatCall) => chatStream(endpoint, call, structuredOutputModels),
    image: async (): Promise<ImageOutcome> => {
      throw new UpstreamError(`${name} upstreams do not generate images`, undefined, 'config');
    },
    native: createNativeMessages(endpoint),
  };
}
