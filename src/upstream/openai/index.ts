// The native OpenAI provider: chat completions, Responses and images over the shared upstream
// HTTP plumbing. Canonical chat calls go out as chat completions with usage read in full;
// chat.completions and Responses callers pass through (`native`).
import type { ChatCall, ImageCall, Provider } from '../port.ts';
import type { UpstreamTarget } from '../upstream-http.ts';
import { chat, chatStream } from './chat.ts';
import { image } from './images.ts';
import { createNativeOpenAI } from './native.ts';
import { embedOverOpenAIWire } from '../openai-embeddings.ts';

export { InvalidImageError } from '../image-error.ts';
export { OPENAI_DIALECTS } from './native.ts';

export interface OpenAIOptions {
  /** e.g. https://api.openai.com/v1 (the paths /chat/completions, /responses and /images/* are appended). */
  baseURL: string;
  apiKey: string;
  /** Sent as OpenAI-Organization when set. */
  organization?: string;
  /** Sent as OpenAI-Project when set. */
  project?: string;
  /** Longest silence accepted once a response has begun (between stream events). */
  timeoutMs?: number;
  /** Longest wait for the connection; default timeoutMs. */
  connectTimeoutMs?: number;
  /** Longest wait from sending the request to the response's status line; default timeoutMs. */
  firstByteTimeoutMs?: number;
}

// OpenAI's own SDK waits up to 10 minutes for a reply (reasoning models think for minutes).
const DEFAULT_TIMEOUT_MS = 600_000;

/** The request headers: Bearer auth, plus the organization and project when configured. */
export function openaiHeaders(options: Pick<OpenAIOptions, 'apiKey' | 'organization' | 'project'>): Record<string, string> {
  const headers: Record<string, string> = { authorization: `Bearer ${options.apiKey}` };
  if (options.organization) headers['OpenAI-Organization'] = options.organization;
  if (options.project) headers['OpenAI-Project'] = options.project;
  return headers;
}

export function createOpenAIProvider(options: OpenAIOptions): Provider {
  const target: UpstreamTarget = {
    baseURL: options.baseURL.replace(/\/+$/, ''),
    apiKey: options.apiKey,
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    connectTimeoutMs: options.connectTimeoutMs,
    firstByteTimeoutMs: options.firstByteTimeoutMs,
    headers: openaiHeaders(options),
  };
  return {
    name: 'openai',
    images: true,
    chat: (call: ChatCall) => chat(target, call),
    chatStream: (call: ChatCall) => chatStream(target, call),
    image: (call: ImageCall) => image(target, call),
    embed: (call) => embedOverOpenAIWire(target, call),
    native: createNativeOpenAI(target),
  };
}
