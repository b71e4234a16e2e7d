// The native Gemini provider (Google's Gemini API), through the official @google/genai client:
// generateContent and streamGenerateContent with the key in x-goog-api-key, usageMetadata read in
// full (cached and thinking tokens), embeddings through batchEmbedContents. Callers of every
// dialect (chat completions, Messages, Responses) are translated to the canonical call.
import { GoogleGenAI } from '@google/genai';
import { UpstreamError, type ImageOutcome, type Provider } from '../port.ts';
import { chat, chatStream, type GeminiTarget } from './chat.ts';
import { embed } from './embeddings.ts';

export interface GeminiOptions {
  /** The API's root, default https://generativelanguage.googleapis.com. */
  baseURL?: string;
  apiKey: string;
  /** The API version in every path, default v1beta (where thinking, caching and JSON schemas are). */
  apiVersion?: string;
  /** Longest silence accepted between stream events. */
  timeoutMs?: number;
  /** Longest wait from sending the request to the response's headers; default timeoutMs. */
  firstByteTimeoutMs?: number;
}

// Thinking models can be silent for minutes before their first token.
const DEFAULT_TIMEOUT_MS = 600_000;
export const GEMINI_BASE_URL = 'https://generativelanguage.googleapis.com';

/**
 * The client: the Gemini API (never Vertex, whatever GOOGLE_GENAI_USE_VERTEXAI says), no retries
 * (the gateway's failover does that) and no client timeout (it would bound a whole stream; the
 * gateway's own deadline bounds the silences instead).
 */
export function geminiClient(options: GeminiOptions): GoogleGenAI {
  return new GoogleGenAI({
    vertexai: false,
    apiKey: options.apiKey,
    apiVersion: options.apiVersion ?? 'v1beta',
    httpOptions: { baseUrl: options.baseURL ?? GEMINI_BASE_URL },
  });
}

export function createGeminiProvider(options: GeminiOptions): Provider {
  return geminiProvider('gemini', geminiClient(options), options.apiKey, options);
}

/** A provider over a configured @google/genai client: the Gemini API's, or Vertex AI's (see vertex/). */
export function geminiProvider(
  name: string,
  client: GoogleGenAI,
  secret: string,
  waits: { timeoutMs?: number; firstByteTimeoutMs?: number },
  embedOneByOne = false,
): Provider {
  const timeoutMs = waits.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const target: GeminiTarget = { client, secret, timeoutMs, firstByteTimeoutMs: waits.firstByteTimeoutMs ?? timeoutMs, embedOneByOne };
  return {
    name,
    images: false,
    chat: (call) => chat(target, call),
    chatStream: (call) => chatStream(target, call),
    embed: (call) => embed(target, call),
    image: (): Promise<ImageOutcome> => Promise.reject(new UpstreamError(`${name} upstreams make no images here`, undefined, 'config')),
  };
}
