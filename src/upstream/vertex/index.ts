// Vertex AI as a native upstream, in one Google Cloud project and location, with Google
// credentials (see auth.ts):
// - `vertex`: Google's Gemini models, through the official @google/genai client in its Vertex
//   mode (publishers/google/models/{model}:generateContent), mapped exactly like the Gemini API;
// - `vertex-anthropic`: Anthropic's Claude models through Vertex's rawPredict and
//   streamRawPredict (publishers/anthropic/models/{model}), spoken by the Anthropic adapter, so
//   Messages callers pass through and every usage field is read as on Anthropic's own API.
import { GoogleGenAI } from '@google/genai';
import { GoogleAuth } from 'google-auth-library';
import type { Provider } from '../port.ts';
import { geminiProvider } from '../gemini/index.ts';
import { DEFAULT_TIMEOUT_MS, messagesProvider } from '../anthropic/index.ts';
import { DEFAULT_STRUCTURED_OUTPUT_MODELS } from '../anthropic/structured.ts';
import { googleAuthOptions } from './auth.ts';
import { vertexMessagesEndpoint } from './anthropic-endpoint.ts';

export interface VertexOptions {
  /** The Google Cloud project id. */
  project: string;
  /** The location: a region (us-east5, europe-west1, …), `global`, or a multi-region (`us`, `eu`). */
  location: string;
  /** The credentials JSON; undefined: Application Default Credentials. */
  credentials?: Record<string, unknown>;
  /** The API's root; default the location's endpoint (vertexBaseURL). */
  baseURL?: string;
  timeoutMs?: number;
  firstByteTimeoutMs?: number;
}

export interface VertexAnthropicOptions extends VertexOptions {
  /** Models that take a strict response_format as Anthropic's structured output (as for the anthropic provider). */
  structuredOutputModels?: readonly string[];
}

/** Vertex AI's endpoint for a location (the same rule as Google's and Anthropic's Vertex clients). */
export function vertexBaseURL(location: string): string {
  if (location === 'global') return 'https://aiplatform.googleapis.com';
  if (location === 'us' || location === 'eu') return `https://aiplatform.${location}.rep.googleapis.com`;
  return `https://${location}-aiplatform.googleapis.com`;
}

export function createVertexGeminiProvider(options: VertexOptions): Provider {
  const client = new GoogleGenAI({
    vertexai: true,
    project: options.project,
    location: options.location,
    googleAuthOptions: googleAuthOptions(options.credentials, options.project),
    httpOptions: { baseUrl: options.baseURL ?? vertexBaseURL(options.location) },
  });
  return geminiProvider('vertex', client, '', options, true);
}

export function createVertexAnthropicProvider(options: VertexAnthropicOptions): Provider {
  const auth = new GoogleAuth(googleAuthOptions(options.credentials, options.project));
  const endpoint = vertexMessagesEndpoint({
    project: options.project,
    location: options.location,
    auth,
    target: {
      baseURL: (options.baseURL ?? vertexBaseURL(options.location)).replace(/\/+$/, ''),
      apiKey: '',
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      firstByteTimeoutMs: options.firstByteTimeoutMs,
      // Authorization is per request (the token is refreshed); Vertex takes the API version in the body.
      headers: {},
    },
  });
  return messagesProvider('vertex-anthropic', endpoint, options.structuredOutputModels ?? DEFAULT_STRUCTURED_OUTPUT_MODELS);
}
