// The Gemini API as the Gemini double (gemini-double.ts) speaks it: its constants, Google's error
// bodies ({error:{code, message, status, details?}}), and the deterministic token accounting a test
// can predict with the helpers exported here. Which requests it refuses: gemini-rules.ts.
//
// Prompt tokens: the prompt is a list of segments: the `tools` array (one segment, when present),
// the systemInstruction, then each item of `contents`. A segment costs jsonTokens (double-http.ts:
// ceil(JSON length / 4)) of itself with every inlineData's `data` emptied, plus GEMINI_MEDIA_TOKENS
// per inlineData part, reported under its modality (IMAGE, AUDIO, VIDEO or DOCUMENT) in
// promptTokensDetails; the rest is TEXT. Output: one token per word of text (wordPieces), one per
// 4 characters of a function call's JSON arguments or of JSON output (jsonPieces), plus the
// thinking tokens, which Gemini reports apart (thoughtsTokenCount) but spends from maxOutputTokens.
import { jsonTokens } from './double-http.ts';

type Json = Record<string, any>;

export const GEMINI_DEFAULT_REPLY = 'Hello from the Gemini double, a short and predictable reply with words enough to cut.';
/** A prompt containing this is blocked: HTTP 200, no candidates, promptFeedback.blockReason SAFETY. */
export const GEMINI_BLOCKED_WORD = 'BLOCK-THIS-PROMPT';
/** A prompt containing this gets a reply stopped half-way with finishReason SAFETY. */
export const GEMINI_UNSAFE_REPLY_WORD = 'STOP-THE-REPLY';
/** Thinking tokens of a call that thinks (capped by a positive thinkingBudget, then by maxOutputTokens). */
export const GEMINI_THOUGHT_TOKENS = 24;
/** The thought summary sent as a {text, thought:true} part when thinkingConfig.includeThoughts is on. */
export const GEMINI_THOUGHT_SUMMARY = '**Weighing the question**\n\nThe user wants a short answer, so I keep it brief.';
/** Implicit caching starts at this many prompt tokens in the cached prefix (Gemini 2.5 Flash's minimum). */
export const GEMINI_CACHE_MIN_TOKENS = 1024;
/** Prompt tokens of one inlineData part (Gemini counts an image up to 384x384 as 258). */
export const GEMINI_MEDIA_TOKENS = 258;
/** Dimensions of an embedding when the request names no outputDimensionality (text-embedding-004's). */
export const GEMINI_EMBEDDING_DIMENSIONS = 768;

const STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ABORTED',
  429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED',
  500: 'INTERNAL',
  501: 'UNIMPLEMENTED',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

/** Google's own wording for the statuses a test scripts (a fault's body defaults to these). */
const MESSAGES: Record<number, string> = {
  429: 'You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.',
  500: 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting',
  503: 'The model is overloaded. Please try again later.',
  504: 'Deadline expired before operation could complete.',
};

/** The body of a scripted status fault: Google's wording where the double knows it, else the fault's message. */
export function geminiFaultBody(code: number, message: string): Json {
  return geminiError(code, MESSAGES[code] ?? message);
}

/** Google's error body for an HTTP status: {error:{code, message, status, details?}}. */
export function geminiError(code: number, message?: string, details?: unknown[]): Json {
  const error: Json = {
    code,
    message: message ?? MESSAGES[code] ?? `HTTP ${code}`,
    status: STATUS[code] ?? (code >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION'),
  };
  if (code === 429 && !details) {
    details = [
      {
        '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
        violations: [
          {
            quotaMetric: 'generativelanguage.googleapis.com/generate_content_paid_tier_input_token_count',
            quotaId: 'GenerateContentPaidTierInputTokensPerModelPerMinute',
            quotaDimensions: { location: 'global', model: 'gemini-2.5-flash' },
            quotaValue: '1000000',
          },
        ],
      },
      {
        '@type': 'type.googleapis.com/google.rpc.Help',
        links: [{ description: 'Learn more about Gemini API quotas', url: 'https://ai.google.dev/gemini-api/docs/rate-limits' }],
      },
      { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '1s' },
    ];
  }
  return { error: details ? { ...error, details } : error };
}

/** What Google answers a key it does not know: 400 INVALID_ARGUMENT, reason API_KEY_INVALID. */
export function apiKeyInvalid(): Json {
  const message = 'API key not valid. Please pass a valid API key.';
  return geminiError(400, message, [
    {
      '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
      reason: 'API_KEY_INVALID',
      domain: 'googleapis.com',
      metadata: { service: 'generativelanguage.googleapis.com' },
    },
    { '@type': 'type.googleapis.com/google.rpc.LocalizedMessage', locale: 'en-US', message },
  ]);
}

// ---- Token accounting -------------------------------------------------------------------------

/** The prompt's segments: tools, systemInstruction, then each content. */
export function geminiSegments(body: Json): unknown[] {
  const segments: unknown[] = [];
  if (Array.isArray(body.tools) && body.tools.length > 0) segments.push(body.tools);
  const system = body.systemInstruction ?? body.system_instruction;
  if (system !== undefined) segments.push(system);
  return [...segments, ...(Array.isArray(body.contents) ? body.contents : [])];
}

export interface ModalityCount {
  modality: string;
  tokenCount: number;
}

/** One segment's tokens by modality (TEXT first). */
function segmentCounts(segment: unknown): Map<string, number> {
  const counts = new Map<string, number>([['TEXT', 0]]);
  const parts = isObject(segment) && Array.isArray(segment.parts) ? segment.parts : [];
  const stripped = isObject(segment)
    ? { ...segment, parts: parts.map((p: Json) => (isObject(p) && isObject(p.inlineData) ? { inlineData: { ...p.inlineData, data: '' } } : p)) }
    : segment;
  counts.set('TEXT', jsonTokens(isObject(segment) && Array.isArray(segment.parts) ? stripped : segment));
  for (const part of parts) {
    if (!isObject(part) || !isObject(part.inlineData)) continue;
    const modality = mediaModality(String(part.inlineData.mimeType ?? ''));
    counts.set(modality, (counts.get(modality) ?? 0) + GEMINI_MEDIA_TOKENS);
  }
  return counts;
}

function mediaModality(mimeType: string): string {
  const kind = mimeType.split('/')[0]!.toUpperCase();
  return ['IMAGE', 'AUDIO', 'VIDEO'].includes(kind) ? kind : 'DOCUMENT';
}

/** Each prompt segment's tokens (all modalities). */
export function geminiSegmentTokens(body: Json): number[] {
  return geminiSegments(body).map((s) => [...segmentCounts(s).values()].reduce((a, b) => a + b, 0));
}

/** promptTokenCount: every prompt token, cached ones included. */
export function geminiPromptTokens(body: Json): number {
  return geminiSegmentTokens(body).reduce((a, b) => a + b, 0);
}

/** promptTokensDetails: the prompt's tokens by modality, TEXT first, modalities with none left out (TEXT always there). */
export function geminiPromptDetails(body: Json): ModalityCount[] {
  const total = new Map<string, number>([['TEXT', 0]]);
  for (const s of geminiSegments(body)) for (const [m, n] of segmentCounts(s)) total.set(m, (total.get(m) ?? 0) + n);
  return [...total].filter(([m, n]) => m === 'TEXT' || n > 0).map(([modality, tokenCount]) => ({ modality, tokenCount }));
}

/**
 * Whether the call thinks, and how many tokens (before maxOutputTokens caps them): with a positive or
 * dynamic (-1) thinkingBudget, a thinkingLevel, or by default on a model named *thinking*, *-pro or
 * gemini-3*; never with a budget of 0.
 */
export function geminiThoughtTokens(model: string, body: Json): number {
  const config = isObject(body.generationConfig) && isObject(body.generationConfig.thinkingConfig) ? body.generationConfig.thinkingConfig : {};
  const budget = config.thinkingBudget;
  if (typeof budget === 'number' && budget > 0) return Math.min(budget, GEMINI_THOUGHT_TOKENS);
  if (budget === 0) return 0;
  if (budget === -1 || typeof config.thinkingLevel === 'string' || /thinking|-pro\b/.test(model) || model.startsWith('gemini-3')) return GEMINI_THOUGHT_TOKENS;
  return 0;
}

/** A Gemini Schema (OpenAPI subset: upper-case types, nullable, propertyOrdering) as JSON Schema. */
export function toJsonSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(toJsonSchema);
  if (!isObject(schema)) return schema;
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'nullable' || key === 'propertyOrdering') continue;
    if (key === 'type' && typeof value === 'string') out.type = value.toLowerCase();
    else if (key === 'properties' && isObject(value)) out.properties = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toJsonSchema(v)]));
    else if (key === 'items' || key === 'anyOf') out[key] = toJsonSchema(value);
    else out[key] = value;
  }
  return out;
}

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
