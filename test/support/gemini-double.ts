// A local Gemini API (generativelanguage.googleapis.com) as the official @google/genai client
// calls it with `new GoogleGenAI({ apiKey, httpOptions: { baseUrl: double.url } })`:
// POST /{version}/models/{model}:generateContent, :streamGenerateContent?alt=sse (each SSE event a
// whole GenerateContentResponse, framed `data: {...}\r\n\r\n` as Google frames it; without alt=sse,
// one JSON array of them), :countTokens, :batchEmbedContents (what the client calls for
// embedContent) and :embedContent. The key comes in `x-goog-api-key` (or `?key=`).
//
// Answers: the reply text (`reply`), or a function call when the request declares functions, the
// mode is not NONE and the last turn is not function responses (mode ANY calls anyway); args are
// `functionCall.args` or an instance of the declared parameters (schemaInstance). JSON output
// (responseMimeType application/json) is an instance of responseSchema / responseJsonSchema, or
// {"answer": reply} without one. Thinking (see geminiThoughtTokens): thoughtsTokenCount, a
// {text, thought:true} summary part first with includeThoughts, and a thoughtSignature on a
// function call part; a gemini-3 model refuses a current-turn function call sent back without one.
// maxOutputTokens caps thinking, then the answer: a reply cut short ends with MAX_TOKENS.
// stopSequences end the text before the first one (STOP). usageMetadata as Gemini sends it: zero
// counts left out, candidatesTokenCount without thoughts, totalTokenCount = prompt + candidates +
// thoughts, cachedContentTokenCount inside promptTokenCount; a stream's every chunk carries the
// running counts (cumulative, not deltas), the last one the final counts and the finishReason.
//
// Implicit caching: cachedContentTokenCount is the longest prefix of whole prompt segments (same
// model) an earlier call sent, when it is at least GEMINI_CACHE_MIN_TOKENS (cacheTokensDetails
// counts it all as TEXT). Token rules: gemini-wire.ts; request rules: gemini-rules.ts.
//
// Errors: Google's {error:{code, message, status, details?}}: a wrong key 400 INVALID_ARGUMENT
// (ErrorInfo API_KEY_INVALID), no key 403 PERMISSION_DENIED, an unknown model (or one that does not
// serve the method) 404 NOT_FOUND, a malformed request 400 INVALID_ARGUMENT; a path the API does
// not have (an unknown version or method) Google's front end's HTML 404. A prompt with
// GEMINI_BLOCKED_WORD: 200, no candidates, promptFeedback.blockReason SAFETY. One with
// GEMINI_UNSAFE_REPLY_WORD: the reply stops half-way with finishReason SAFETY (whole: no content,
// candidatesTokenCount the half generated; streamed: the first half, then a SAFETY chunk).
// candidateCount > 1 repeats the candidate (indexes 0…n-1) and multiplies candidatesTokenCount.
// Faults (FaultScript): a status fault's body is Google's for that status; a stream's error event
// is `data: {"error":{"code":500,…,"status":"INTERNAL"}}`; `garbage` sends the shared double's
// half JSON document (application/json) on every route, streams included.
//
// Embeddings: unit vectors from the text (geminiEmbeddingOf), outputDimensionality values
// (default GEMINI_EMBEDDING_DIMENSIONS); the Gemini API reports no usage for them.
import { createHash } from 'node:crypto';
import { idSuffix, jsonPieces, prefixKeys, schemaInstance, startDoubleServer, wordPieces, type DoubleHandle, type Exchange } from './double-http.ts';
import {
  GEMINI_BLOCKED_WORD,
  GEMINI_CACHE_MIN_TOKENS,
  GEMINI_DEFAULT_REPLY,
  GEMINI_EMBEDDING_DIMENSIONS,
  GEMINI_THOUGHT_SUMMARY,
  GEMINI_UNSAFE_REPLY_WORD,
  apiKeyInvalid,
  geminiError,
  geminiFaultBody,
  geminiPromptDetails,
  geminiPromptTokens,
  geminiSegments,
  geminiSegmentTokens,
  geminiThoughtTokens,
  isObject,
  toJsonSchema,
} from './gemini-wire.ts';
import { invalidGenerate } from './gemini-rules.ts';

export * from './gemini-wire.ts';
export type { Fault } from './double-faults.ts';

type Json = Record<string, any>;

export interface GeminiDoubleOptions {
  /** The key x-goog-api-key must carry (default 'test-gemini-key'). */
  apiKey?: string;
  /** The API versions served (default v1beta and v1). */
  apiVersions?: string[];
  /** The models served (default: any named gemini-*, gemma-* or *embedding*); embedding models are those with "embedding" in the name. */
  models?: string[];
  /** The reply text; a function sees the request body. */
  reply?: string | ((body: Json) => string);
  /** false: never call a function. Otherwise the name (default: the only allowed one, or the first declared) and args (default: an instance of its parameters). */
  functionCall?: false | { name?: string; args?: Json };
  /** Send the thought summary part whenever the call thinks, asked for or not (Gemini sends it only with includeThoughts): checks that a gateway never shows it. */
  alwaysThoughts?: boolean;
}

export interface GeminiDouble extends DoubleHandle {
  /** Every call whose path names a model: model, method, API version, `alt` query (refused ones included). */
  readonly seen: { model: string; method: string; apiVersion: string; alt: string | null }[];
  /** The usageMetadata of every completed generate reply (a stream's last chunk's), blocked prompts included. */
  readonly usages: Json[];
  /** The responseId of every generate reply, in order. */
  readonly responseIds: string[];
  clearCache(): void;
}

const ROUTE = /^\/([^/]+)\/models\/([^/:]+):([A-Za-z]+)$/;
const GENERATE = ['generateContent', 'streamGenerateContent', 'countTokens'];
const EMBED = ['batchEmbedContents', 'embedContent'];
const HTML_404 =
  '<!DOCTYPE html>\n<html lang=en>\n  <meta charset=utf-8>\n  <title>Error 404 (Not Found)!!1</title>\n  <p><b>404.</b> <ins>That’s an error.</ins>\n  <p>The requested URL was not found on this server.  <ins>That’s all we know.</ins>\n';
const BLOCKED_RATINGS = [
  { category: 'HARM_CATEGORY_SEXUALLY_EXPLICIT', probability: 'NEGLIGIBLE' },
  { category: 'HARM_CATEGORY_HATE_SPEECH', probability: 'NEGLIGIBLE' },
  { category: 'HARM_CATEGORY_HARASSMENT', probability: 'NEGLIGIBLE' },
  { category: 'HARM_CATEGORY_DANGEROUS_CONTENT', probability: 'HIGH', blocked: true },
];

/** The double's embedding of a text: a unit vector of `dimensions` values, the same every time. */
export function geminiEmbeddingOf(text: string, dimensions: number): number[] {
  const raw: number[] = [];
  for (let block = 0; raw.length < dimensions; block++) {
    const bytes = createHash('sha256').update(`${block}:${text}`).digest();
    for (let i = 0; i + 1 < bytes.length && raw.length < dimensions; i += 2) raw.push(bytes.readUInt16LE(i) / 32767.5 - 1);
  }
  const norm = Math.sqrt(raw.reduce((s, x) => s + x * x, 0)) || 1;
  return raw.map((x) => x / norm);
}

export async function startGeminiDouble(options: GeminiDoubleOptions = {}): Promise<GeminiDouble> {
  const apiKey = options.apiKey ?? 'test-gemini-key';
  const versions = new Set(options.apiVersions ?? ['v1beta', 'v1']);
  const served = (model: string) => (options.models ? options.models.includes(model) : /^(gemini-|gemma-)|embedding/.test(model));
  const cache = new Set<string>();
  const seen: GeminiDouble['seen'] = [];
  const usages: Json[] = [];
  const responseIds: string[] = [];
  let answered = 0;

  async function handle(ex: Exchange): Promise<void> {
    const { req, path, body } = ex;
    const url = new URL(req.url ?? '/', 'http://double');
    const route = ROUTE.exec(path);
    if (!route || req.method !== 'POST' || !versions.has(route[1]!) || ![...GENERATE, ...EMBED].includes(route[3]!)) {
      ex.res.writeHead(404, { 'content-type': 'text/html; charset=UTF-8' });
      return void ex.res.end(HTML_404);
    }
    const [, apiVersion, rawModel, method] = route as unknown as [string, string, string, string];
    const model = decodeURIComponent(rawModel);
    seen.push({ model, method, apiVersion, alt: url.searchParams.get('alt') });
    const key = req.headers['x-goog-api-key'] ?? url.searchParams.get('key');
    if (!key) {
      const message =
        "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.";
      return ex.json(403, geminiError(403, message));
    }
    if (key !== apiKey) return ex.json(400, apiKeyInvalid());
    if (!served(model) || model.includes('embedding') !== EMBED.includes(method)) {
      const message = `models/${model} is not found for API version ${apiVersion}, or is not supported for ${method}. Call ListModels to see the list of available models and their supported methods.`;
      return ex.json(404, geminiError(404, message));
    }
    if (ex.invalidJson) return ex.json(400, geminiError(400, 'Invalid JSON payload received. Unexpected token.'));
    if (EMBED.includes(method)) return embed(ex, model, method);
    if (method === 'countTokens') return countTokens(ex, model);
    const problem = invalidGenerate(model, body);
    if (problem) return ex.json(400, geminiError(400, problem.message, problem.details));
    return generate(ex, model, method === 'streamGenerateContent' ? url.searchParams.get('alt') : 'json');
  }

  function countTokens(ex: Exchange, model: string): Promise<void> {
    const request = isObject(ex.body.generateContentRequest) ? ex.body.generateContentRequest : ex.body;
    const problem = invalidGenerate(model, request);
    if (problem) return ex.json(400, geminiError(400, problem.message, problem.details));
    return ex.json(200, { totalTokens: geminiPromptTokens(request), promptTokensDetails: geminiPromptDetails(request) });
  }

  /** cachedContentTokenCount for this prompt; remembers its prefixes for the next calls. */
  function cachedTokens(model: string, body: Json): number {
    const keys = prefixKeys(model, geminiSegments(body));
    let hit = -1;
    keys.forEach((key, i) => {
      if (cache.has(key)) hit = i;
    });
    for (const key of keys) cache.add(key);
    const cached = geminiSegmentTokens(body)
      .slice(0, hit + 1)
      .reduce((a, b) => a + b, 0);
    return cached >= GEMINI_CACHE_MIN_TOKENS ? cached : 0;
  }

  async function generate(ex: Exchange, model: string, alt: string | null): Promise<void> {
    const { body } = ex;
    const n = ++answered;
    const prompt = geminiPromptTokens(body);
    const promptDetails = geminiPromptDetails(body);
    const frame = { modelVersion: model, responseId: idSuffix(`gemini ${n}`, 22) };
    responseIds.push(frame.responseId);
    const prompted = JSON.stringify([body.contents, body.systemInstruction ?? null]);
    const streamed = alt === 'sse';

    if (prompted.includes(GEMINI_BLOCKED_WORD)) {
      const usageMetadata = { promptTokenCount: prompt, totalTokenCount: prompt, promptTokensDetails: promptDetails };
      const blocked = { promptFeedback: { blockReason: 'SAFETY', safetyRatings: BLOCKED_RATINGS }, usageMetadata, ...frame };
      usages.push(usageMetadata);
      if (!streamed) return ex.json(200, alt === 'json' ? blocked : [blocked]);
      const sse = ex.sse(streamError);
      if (await sse.event(data(blocked))) await sse.end();
      return;
    }

    const cached = cachedTokens(model, body);
    const turn = compose(model, body, prompted.includes(GEMINI_UNSAFE_REPLY_WORD), n);
    const config = isObject(body.generationConfig) ? body.generationConfig : {};
    const count = Number(config.candidateCount ?? 1);
    /** Usage once `sent` answer tokens (per candidate) went out. */
    const usage = (sent: number): Json => {
      const candidates = sent * count;
      return {
        promptTokenCount: prompt,
        ...(candidates > 0 && { candidatesTokenCount: candidates }),
        totalTokenCount: prompt + candidates + turn.thoughts,
        ...(cached > 0 && { cachedContentTokenCount: cached }),
        promptTokensDetails: promptDetails,
        ...(cached > 0 && { cacheTokensDetails: [{ modality: 'TEXT', tokenCount: cached }] }),
        ...(turn.thoughts > 0 && { thoughtsTokenCount: turn.thoughts }),
      };
    };
    const candidates = (parts: Json[] | null, finishReason?: string): Json[] =>
      Array.from({ length: count }, (_, index) => ({
        ...(parts && { content: parts.length > 0 ? { parts, role: 'model' } : { role: 'model' } }),
        ...(finishReason && { finishReason }),
        ...(finishReason === 'SAFETY' && { safetyRatings: BLOCKED_RATINGS }),
        index,
      }));

    const answerParts = turn.call ? [turn.call] : turn.pieces.length > 0 ? [{ text: turn.pieces.join('') }] : [];
    if (!streamed) {
      const whole = {
        candidates: candidates(turn.finish === 'SAFETY' ? null : [...turn.thoughtParts, ...answerParts], turn.finish),
        usageMetadata: usage(turn.output),
        ...frame,
      };
      usages.push(whole.usageMetadata);
      if (alt === 'json') return ex.json(200, whole);
      // streamGenerateContent without alt=sse: one JSON array of the chunks (here a single one).
      return ex.json(200, [whole]);
    }

    // The stream: the thought summary, then one chunk per text piece (or the whole function call), the
    // last with the finishReason and the final usage. Every chunk carries the running usage.
    const chunks: { parts: Json[] | null; sent: number }[] = [];
    if (turn.thoughtParts.length > 0) chunks.push({ parts: turn.thoughtParts, sent: 0 });
    if (turn.call) chunks.push({ parts: [turn.call], sent: turn.output });
    else turn.pieces.forEach((text, i) => chunks.push({ parts: [{ text }], sent: i + 1 }));
    if (turn.finish === 'SAFETY' || chunks.length === 0) chunks.push({ parts: turn.finish === 'SAFETY' ? null : [], sent: turn.output });
    const sse = ex.sse(streamError);
    for (const [i, chunk] of chunks.entries()) {
      const final = i === chunks.length - 1;
      const usageMetadata = usage(final ? turn.output : chunk.sent);
      const wrote = await sse.event(data({ candidates: candidates(chunk.parts, final ? turn.finish : undefined), usageMetadata, ...frame }));
      if (final && wrote) usages.push(usageMetadata);
      if (!wrote) return;
    }
    await sse.end();
  }

  interface Turn {
    thoughts: number;
    thoughtParts: Json[];
    /** Text pieces, one output token each (none for a call). */
    pieces: string[];
    call: Json | null;
    /** Output tokens of the answer, thoughts excluded (per candidate). */
    output: number;
    finish: 'STOP' | 'MAX_TOKENS' | 'SAFETY';
  }

  /** The answer within maxOutputTokens: thinking first, then a function call or the text. */
  function compose(model: string, body: Json, unsafe: boolean, n: number): Turn {
    const config = isObject(body.generationConfig) ? body.generationConfig : {};
    const cap = Number(config.maxOutputTokens ?? Infinity);
    const thoughts = Math.min(geminiThoughtTokens(model, body), cap);
    const thinkingConfig = isObject(config.thinkingConfig) ? config.thinkingConfig : {};
    const thoughtParts =
      thoughts > 0 && (thinkingConfig.includeThoughts === true || options.alwaysThoughts) ? [{ text: GEMINI_THOUGHT_SUMMARY, thought: true }] : [];
    const left = cap - thoughts;
    const call = callFor(body);
    if (call) {
      const tokens = jsonPieces(JSON.stringify(call.args)).length;
      // A call that does not fit is dropped: the tokens were spent, the call never arrives.
      if (tokens > left) return { thoughts, thoughtParts, pieces: [], call: null, output: left, finish: 'MAX_TOKENS' };
      const signature = thoughts > 0 ? { thoughtSignature: Buffer.from(`gemini-double signature ${n} ${call.name}`).toString('base64') } : {};
      return { thoughts, thoughtParts, pieces: [], call: { functionCall: call, ...signature }, output: tokens, finish: 'STOP' };
    }
    const reply = typeof options.reply === 'function' ? options.reply(body) : (options.reply ?? GEMINI_DEFAULT_REPLY);
    const schema = config.responseJsonSchema ?? (config.responseSchema === undefined ? undefined : toJsonSchema(config.responseSchema));
    let all: string[];
    if (config.responseMimeType === 'application/json')
      all = jsonPieces(schema === undefined ? JSON.stringify({ answer: reply }) : schemaInstance(schema, body));
    else if (config.responseMimeType === 'text/x.enum' && isObject(schema) && Array.isArray(schema.enum)) all = [String(schema.enum[0])];
    else {
      const stops = Array.isArray(config.stopSequences) ? (config.stopSequences as string[]) : [];
      const at = Math.min(...stops.map((s) => reply.indexOf(s)).filter((i) => i >= 0), reply.length);
      all = wordPieces(reply.slice(0, at));
    }
    if (unsafe) {
      const pieces = all.slice(0, Math.min(Math.ceil(all.length / 2), left));
      return { thoughts, thoughtParts, pieces, call: null, output: pieces.length, finish: 'SAFETY' };
    }
    const pieces = all.slice(0, left);
    return { thoughts, thoughtParts, pieces, call: null, output: pieces.length, finish: pieces.length < all.length ? 'MAX_TOKENS' : 'STOP' };
  }

  function callFor(body: Json): { name: string; args: Json } | null {
    const declarations = (Array.isArray(body.tools) ? body.tools : []).flatMap((t: Json) =>
      Array.isArray(t.functionDeclarations) ? t.functionDeclarations : [],
    );
    const calling = isObject(body.toolConfig) && isObject(body.toolConfig.functionCallingConfig) ? body.toolConfig.functionCallingConfig : {};
    const mode = String(calling.mode ?? 'AUTO');
    const contents = body.contents as Json[];
    const answered = contents[contents.length - 1]!.parts.some((p: Json) => isObject(p.functionResponse));
    if (options.functionCall === false || declarations.length === 0 || mode === 'NONE' || (answered && mode !== 'ANY')) return null;
    const allowed = Array.isArray(calling.allowedFunctionNames) ? (calling.allowedFunctionNames as string[]) : [];
    const name = options.functionCall?.name ?? allowed[0] ?? String(declarations[0].name);
    const declaration = declarations.find((d: Json) => d.name === name) ?? {};
    const schema = declaration.parametersJsonSchema ?? (declaration.parameters === undefined ? { type: 'object' } : toJsonSchema(declaration.parameters));
    return { name, args: options.functionCall?.args ?? (JSON.parse(schemaInstance(schema, body)) as Json) };
  }

  async function embed(ex: Exchange, model: string, method: string): Promise<void> {
    const batch = method === 'batchEmbedContents';
    const requests: unknown[] = batch ? (Array.isArray(ex.body.requests) ? ex.body.requests : []) : [ex.body];
    const name = batch ? 'BatchEmbedContentsRequest' : 'EmbedContentRequest';
    if (batch && (requests.length === 0 || requests.length > 100))
      return ex.json(400, geminiError(400, `* ${name}.requests: between 1 and 100 requests are allowed in one batch.\n`));
    const embeddings: { values: number[] }[] = [];
    for (const [i, request] of requests.entries()) {
      const where = batch ? `${name}.requests[${i}]` : name;
      const r = isObject(request) ? request : {};
      if (batch && r.model !== `models/${model}`) {
        return ex.json(400, geminiError(400, `* ${where}.model: the model of every request must be the batch's, models/${model}.\n`));
      }
      const parts = isObject(r.content) && Array.isArray(r.content.parts) ? r.content.parts : [];
      const texts = parts.map((p: unknown) => (isObject(p) && typeof p.text === 'string' ? p.text : null));
      if (texts.length === 0 || texts.some((t: string | null) => !t)) {
        return ex.json(400, geminiError(400, `* ${where}.content.parts: every part must have a non-empty text.\n`));
      }
      const dimensions = r.outputDimensionality ?? GEMINI_EMBEDDING_DIMENSIONS;
      if (!(Number.isInteger(dimensions) && dimensions >= 1 && dimensions <= 3072)) {
        return ex.json(400, geminiError(400, `* ${where}.output_dimensionality: must be between 1 and 3072.\n`));
      }
      embeddings.push({ values: geminiEmbeddingOf(texts.join(' '), dimensions) });
    }
    return ex.json(200, batch ? { embeddings } : { embedding: embeddings[0] });
  }

  const handle_ = await startDoubleServer({
    errorBody: (status, message) => (message.startsWith('double crashed') ? geminiError(status, message) : geminiFaultBody(status, message)),
    headers: () => ({
      server: 'scaffolding on HTTPServer2',
      vary: 'Origin, X-Origin, Referer',
      'server-timing': 'gfet4t7; dur=1',
      'x-content-type-options': 'nosniff',
    }),
    handle,
  });
  return {
    ...handle_,
    get abandoned() {
      return handle_.abandoned;
    },
    get calls() {
      return handle_.calls;
    },
    seen,
    usages,
    responseIds,
    clearCache: () => cache.clear(),
  };
}

function streamError(): string {
  return data(geminiError(500));
}

/** One SSE event as Google frames it. */
function data(payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\r\n\r\n`;
}
