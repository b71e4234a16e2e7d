// A local upstream speaking OpenAI's native API as the `openai` package expects it:
// chat completions and Responses (plain and SSE), image generations and edits (JSON and
// multipart), Bearer auth and errors as {error:{message, type, param, code}}. `double.url` is
// the origin; the SDK's baseURL is `${double.url}/v1`. Embeddings too: each text input costs
// ceil(length / 4) tokens (at least 1), a list of token ids its length; a vector has
// OPENAI_EMBEDDING_DIMENSIONS (or `dimensions`) values, floats or base64 float32 bytes.
//
// Token rules (see double-http.ts): the prompt is a list of segments: the tools array (one
// segment, when present), then for chat each message, for Responses the instructions and each
// input item (a string input is one {role:"user", content} item). Each costs
// ceil(JSON length / 4). Output: one token per word of text, one per 4 characters of function
// arguments, plus OPENAI_REASONING_TOKENS[effort] hidden reasoning tokens, which count inside
// completion/output tokens and are spent first from max_(completion_|output_)tokens.
//
// Caching: cached_tokens is the longest prefix of whole segments (same model) that an earlier
// request already sent, in tokens. It is part of prompt_tokens / input_tokens, as OpenAI
// reports it. There is no 1024-token minimum.
//
// Structured output: chat's response_format and Responses' text.format of type json_schema are
// answered with JSON valid against the schema, json_object with {"answer": <the reply>}; that
// text counts one token per 4 characters, like function arguments.
import sharp from 'sharp';
import {
  idSuffix,
  jsonPieces,
  jsonTokens,
  prefixKeys,
  schemaInstance,
  startDoubleServer,
  wordPieces,
  type DoubleHandle,
  type Exchange,
  type RecordedFile,
} from './double-http.ts';

export type { Fault } from './double-faults.ts';
export type { RecordedFile, RecordedRequest } from './double-http.ts';

export interface OpenAIDoubleOptions {
  /** The key `Authorization: Bearer` must carry (default 'test-openai-key'). */
  apiKey?: string;
  /** The assistant text; a function sees the parsed request body. */
  reply?: string | ((body: Record<string, unknown>) => string);
  /** When set and the request has tools, call this function (name: tool_choice's, else the first tool's). */
  toolCall?: { name?: string; arguments: string };
}

export interface OpenAIDouble extends DoubleHandle {
  /** Forget every cached prefix. */
  clearCache(): void;
}

export const OPENAI_DEFAULT_REPLY = 'Hello from the OpenAI double, a small and predictable reply with enough words to cut.';
/** Hidden reasoning tokens per effort (chat `reasoning_effort`, Responses `reasoning.effort`, default medium). */
export const OPENAI_REASONING_TOKENS: Readonly<Record<string, number>> = { none: 0, minimal: 4, low: 8, medium: 16, high: 32, xhigh: 64, max: 128 };
/** Image usage (gpt-image models): output tokens by quality for a square image, ×1.5 for the others. */
export const OPENAI_IMAGE_OUTPUT_TOKENS: Readonly<Record<string, number>> = { low: 272, medium: 1056, high: 4160 };
/** Image usage: input tokens per input image of an edit. */
export const OPENAI_IMAGE_INPUT_TOKENS = 85;

type Body = Record<string, unknown>;
type Item = Record<string, unknown>;

/** The prompt segments of a chat (`messages`) or Responses (`input`) body, in tokens. */
export function openaiSegmentTokens(body: Body): number[] {
  return promptSegments(body).map(jsonTokens);
}

/** Dimensions of the double's embeddings when the request names none. */
export const OPENAI_EMBEDDING_DIMENSIONS = 8;

/** The tokens the double counts for an embeddings input. */
export function openaiEmbeddingTokens(input: unknown): number {
  const items = typeof input === 'string' ? [input] : Array.isArray(input) && typeof input[0] === 'number' ? [input] : asArray(input);
  return items.reduce((n: number, item) => n + (typeof item === 'string' ? Math.max(1, Math.ceil(item.length / 4)) : Array.isArray(item) ? item.length : 0), 0);
}

/** The double's vector for one input: values from its characters, the same every time. */
export function openaiEmbeddingOf(item: unknown, dimensions: number): number[] {
  const text = typeof item === 'string' ? item : JSON.stringify(item);
  return Array.from({ length: dimensions }, (_, i) => ((text.charCodeAt(i % text.length) * (i + 1)) % 97) / 97);
}

/** All prompt tokens: prompt_tokens (chat) or input_tokens (Responses), cached ones included. */
export function openaiPromptTokens(body: Body): number {
  return openaiSegmentTokens(body).reduce((a, b) => a + b, 0);
}

function promptSegments(body: Body): unknown[] {
  const segments: unknown[] = [];
  if (Array.isArray(body.tools) && body.tools.length > 0) segments.push(body.tools);
  if ('messages' in body) return [...segments, ...asArray(body.messages)];
  if (typeof body.instructions === 'string') segments.push({ role: 'system', content: body.instructions });
  if (typeof body.input === 'string') segments.push({ role: 'user', content: body.input });
  else segments.push(...asArray(body.input));
  return segments;
}

export async function startOpenAIDouble(options: OpenAIDoubleOptions = {}): Promise<OpenAIDouble> {
  const apiKey = options.apiKey ?? 'test-openai-key';
  const cache = new Set<string>();
  const images = new Map<string, Promise<string>>();
  let served = 0;
  let answered = 0;

  async function handle(ex: Exchange): Promise<void> {
    const { req, path, body } = ex;
    const auth = req.headers.authorization;
    if (auth !== `Bearer ${apiKey}`) {
      const message = auth
        ? `Incorrect API key provided: ${auth.replace(/^Bearer\s*/, '')}. You can find your API key at https://platform.openai.com/account/api-keys.`
        : "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth.";
      return ex.json(401, errorBody(message, 'invalid_request_error', null, auth ? 'invalid_api_key' : null));
    }
    const routes: Record<string, (ex: Exchange) => Promise<void>> = {
      '/v1/chat/completions': chat,
      '/v1/responses': responses,
      '/v1/images/generations': imageCall,
      '/v1/images/edits': imageCall,
      '/v1/embeddings': embeddingsCall,
    };
    const route = req.method === 'POST' ? routes[path] : undefined;
    if (!route) return ex.json(404, errorBody(`Invalid URL (${req.method} ${path})`, 'invalid_request_error'));
    if (ex.invalidJson) return ex.json(400, errorBody('We could not parse the JSON body of your request.', 'invalid_request_error'));
    const problem = path === '/v1/chat/completions' ? invalidChat(body) : path === '/v1/responses' ? invalidResponses(body) : null;
    if (problem) return ex.json(400, errorBody(problem.message, 'invalid_request_error', problem.param));
    return route(ex);
  }

  /** cached_tokens for this prompt; remembers its prefixes for the next requests. */
  function cachedTokens(body: Body): number {
    const segments = promptSegments(body);
    const keys = prefixKeys(String(body.model), segments);
    let hit = -1;
    keys.forEach((key, i) => {
      if (cache.has(key)) hit = i;
    });
    for (const key of keys) cache.add(key);
    return segments.slice(0, hit + 1).reduce((sum: number, s) => sum + jsonTokens(s), 0);
  }

  /** The answer within the token cap: reasoning first, then a function call or the text. */
  function compose(body: Body, cap: number, effort: string | null): Turn {
    const reasoning = Math.min(effort ? OPENAI_REASONING_TOKENS[effort]! : 0, cap);
    const left = cap - reasoning;
    const call = callFor(body);
    if (call) {
      const pieces = jsonPieces(call.arguments);
      // A call that does not fit is dropped: the tokens were spent, the call never arrives.
      if (pieces.length > left) return { reasoning, pieces: [], call: null, cut: true, output: cap };
      return { reasoning, pieces, call, cut: false, output: reasoning + pieces.length };
    }
    const reply = typeof options.reply === 'function' ? options.reply(body) : (options.reply ?? OPENAI_DEFAULT_REPLY);
    const format = 'messages' in body ? body.response_format : isObject(body.text) ? body.text.format : undefined;
    const schema = isObject(format) && format.type === 'json_schema' ? (isObject(format.json_schema) ? format.json_schema.schema : format.schema) : undefined;
    const all =
      schema !== undefined
        ? jsonPieces(schemaInstance(schema, body))
        : isObject(format) && format.type === 'json_object'
          ? jsonPieces(JSON.stringify({ answer: reply }))
          : wordPieces(reply);
    const pieces = all.slice(0, left);
    return { reasoning, pieces, call: null, cut: pieces.length < all.length, output: reasoning + pieces.length };
  }

  function callFor(body: Body): { name: string; arguments: string } | null {
    const tools = asArray(body.tools).filter(isObject);
    const choice = body.tool_choice;
    if (!options.toolCall || tools.length === 0 || choice === 'none') return null;
    const chosen = isObject(choice) ? (isObject(choice.function) ? choice.function.name : choice.name) : undefined;
    const first = tools[0]!;
    const name = options.toolCall.name ?? String(chosen ?? (isObject(first.function) ? first.function.name : first.name));
    return { name, arguments: options.toolCall.arguments };
  }

  // ---- Chat completions -------------------------------------------------------------------

  async function chat(ex: Exchange): Promise<void> {
    const { body } = ex;
    const n = ++served;
    const prompt = openaiPromptTokens(body);
    const cached = cachedTokens(body);
    const cap = Number(body.max_completion_tokens ?? body.max_tokens ?? Infinity);
    const turn = compose(body, cap, typeof body.reasoning_effort === 'string' ? body.reasoning_effort : null);
    const finish = turn.cut ? 'length' : turn.call ? 'tool_calls' : 'stop';
    const usage = {
      prompt_tokens: prompt,
      completion_tokens: turn.output,
      total_tokens: prompt + turn.output,
      prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: turn.reasoning, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    };
    const frame = {
      id: `chatcmpl-${idSuffix(`chat ${n}`, 29)}`,
      created: Math.floor(Date.now() / 1000),
      model: String(body.model),
      service_tier: 'default',
      system_fingerprint: 'fp_double',
    };
    const toolCall = turn.call && { id: `call_${idSuffix(`call ${n}`)}`, type: 'function', function: turn.call };

    if (body.stream !== true) {
      const message = {
        role: 'assistant',
        content: toolCall ? null : turn.pieces.join(''),
        refusal: null,
        annotations: [],
        ...(toolCall && { tool_calls: [toolCall] }),
      };
      return ex.json(200, { ...frame, object: 'chat.completion', choices: [{ index: 0, message, logprobs: null, finish_reason: finish }], usage });
    }

    const includeUsage = isObject(body.stream_options) && body.stream_options.include_usage === true;
    const sse = ex.sse(() =>
      data({ error: { message: 'The server had an error while processing your request.', type: 'server_error', param: null, code: null } }),
    );
    // With include_usage every chunk carries usage: null, and one last chunk has no choices.
    const chunk = (delta: Item, finishReason: string | null = null) =>
      sse.event(
        data({
          ...frame,
          object: 'chat.completion.chunk',
          choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
          ...(includeUsage && { usage: null }),
        }),
      );

    await chunk({ role: 'assistant', content: toolCall ? null : '', refusal: null });
    if (toolCall) {
      await chunk({ tool_calls: [{ index: 0, id: toolCall.id, type: 'function', function: { name: toolCall.function.name, arguments: '' } }] });
      for (const piece of turn.pieces) {
        if (!sse.open) return;
        await chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] });
      }
    } else {
      for (const piece of turn.pieces) {
        if (!sse.open) return;
        await chunk({ content: piece });
      }
    }
    await chunk({}, finish);
    if (includeUsage) await sse.event(data({ ...frame, object: 'chat.completion.chunk', choices: [], usage }));
    await sse.end('data: [DONE]\n\n');
  }

  // ---- Responses --------------------------------------------------------------------------

  async function responses(ex: Exchange): Promise<void> {
    const { body } = ex;
    const n = ++served;
    const input = openaiPromptTokens(body);
    const cached = cachedTokens(body);
    const reasoningParam = isObject(body.reasoning) ? body.reasoning : null;
    const effort = reasoningParam ? String(reasoningParam.effort ?? 'medium') : null;
    const turn = compose(body, Number(body.max_output_tokens ?? Infinity), effort);
    const status = turn.cut ? 'incomplete' : 'completed';
    const include = asArray(body.include);

    const output: Item[] = [];
    if (reasoningParam) {
      output.push({
        id: `rs_${idSuffix(`rs ${n}`, 40)}`,
        type: 'reasoning',
        summary: [],
        ...(include.includes('reasoning.encrypted_content') && {
          encrypted_content: Buffer.from(`double reasoning ${n}: ${turn.reasoning} tokens`).toString('base64'),
        }),
      });
    }
    if (turn.call) {
      output.push({
        id: `fc_${idSuffix(`fc ${n}`, 40)}`,
        type: 'function_call',
        status: 'completed',
        arguments: turn.call.arguments,
        call_id: `call_${idSuffix(`call ${n}`)}`,
        name: turn.call.name,
      });
    } else if (turn.pieces.length > 0) {
      output.push({
        id: `msg_${idSuffix(`msg ${n}`, 40)}`,
        type: 'message',
        status,
        role: 'assistant',
        content: [{ type: 'output_text', text: turn.pieces.join(''), annotations: [], logprobs: [] }],
      });
    }
    const created = Math.floor(Date.now() / 1000);
    const base = {
      id: `resp_${idSuffix(`resp ${n}`, 40)}`,
      object: 'response',
      created_at: created,
      status: 'in_progress',
      background: false,
      error: null,
      incomplete_details: null,
      instructions: body.instructions ?? null,
      max_output_tokens: body.max_output_tokens ?? null,
      model: String(body.model),
      output: [] as Item[],
      parallel_tool_calls: body.parallel_tool_calls ?? true,
      previous_response_id: body.previous_response_id ?? null,
      reasoning: { effort, summary: reasoningParam?.summary ?? null },
      store: body.store ?? true,
      temperature: body.temperature ?? 1,
      text: body.text ?? { format: { type: 'text' } },
      tool_choice: body.tool_choice ?? 'auto',
      tools: body.tools ?? [],
      top_p: body.top_p ?? 1,
      truncation: 'disabled',
      usage: null as Item | null,
      user: null,
      metadata: body.metadata ?? {},
    };
    const final = {
      ...base,
      status,
      completed_at: status === 'completed' ? created : null,
      incomplete_details: turn.cut ? { reason: 'max_output_tokens' } : null,
      output,
      usage: {
        input_tokens: input,
        input_tokens_details: { cached_tokens: cached },
        output_tokens: turn.output,
        output_tokens_details: { reasoning_tokens: turn.reasoning },
        total_tokens: input + turn.output,
      },
    };
    if (body.stream !== true) return ex.json(200, final);

    let seq = 0;
    const sse = ex.sse((sent) =>
      named('response.failed', {
        type: 'response.failed',
        sequence_number: sent,
        response: { ...base, status: 'failed', error: { code: 'server_error', message: 'The model failed to generate a response.' } },
      }),
    );
    const send = (type: string, payload: Item) => sse.event(named(type, { type, sequence_number: seq++, ...payload }));
    await send('response.created', { response: base });
    await send('response.in_progress', { response: base });
    for (const [index, item] of output.entries()) {
      if (!sse.open) return;
      await streamItem(send, item, index, turn.pieces, () => sse.open);
    }
    await send(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: final });
    await sse.end();
  }

  async function streamItem(send: (type: string, payload: Item) => Promise<boolean>, item: Item, output_index: number, pieces: string[], open: () => boolean) {
    const item_id = item.id;
    if (item.type === 'reasoning') {
      await send('response.output_item.added', { output_index, item: { ...item, summary: [] } });
    } else if (item.type === 'function_call') {
      await send('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', arguments: '' } });
      for (const delta of pieces) {
        if (!open()) return;
        await send('response.function_call_arguments.delta', { item_id, output_index, delta });
      }
      await send('response.function_call_arguments.done', { item_id, output_index, name: item.name, arguments: item.arguments });
    } else {
      const [part] = item.content as Item[];
      const where = { item_id, output_index, content_index: 0 };
      await send('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', content: [] } });
      await send('response.content_part.added', { ...where, part: { ...part, text: '' } });
      for (const delta of pieces) {
        if (!open()) return;
        await send('response.output_text.delta', { ...where, delta, logprobs: [] });
      }
      await send('response.output_text.done', { ...where, text: part!.text, logprobs: [] });
      await send('response.content_part.done', { ...where, part });
    }
    await send('response.output_item.done', { output_index, item });
  }

  // ---- Images -----------------------------------------------------------------------------

  async function embeddingsCall(ex: Exchange): Promise<void> {
    const { body } = ex;
    const input = body.input;
    const items = typeof input === 'string' ? [input] : Array.isArray(input) && typeof input[0] === 'number' ? [input] : asArray(input);
    if (typeof body.model !== 'string' || items.length === 0 || items.some((i) => i === '' || (Array.isArray(i) && i.length === 0)))
      return ex.json(400, errorBody("'input' : input must be a non-empty string or array", 'invalid_request_error', 'input'));
    const dimensions = typeof body.dimensions === 'number' ? body.dimensions : OPENAI_EMBEDDING_DIMENSIONS;
    const base64 = body.encoding_format === 'base64';
    const data = items.map((item, index) => {
      const v = openaiEmbeddingOf(item, dimensions);
      if (!base64) return { object: 'embedding', index, embedding: v };
      const bytes = Buffer.alloc(v.length * 4);
      v.forEach((x, i) => bytes.writeFloatLE(x, i * 4));
      return { object: 'embedding', index, embedding: bytes.toString('base64') };
    });
    const tokens = openaiEmbeddingTokens(input);
    return ex.json(200, { object: 'list', data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
  }

  async function imageCall(ex: Exchange): Promise<void> {
    const { body, path } = ex;
    const edit = path.endsWith('/edits');
    const prompt = body.prompt;
    if (typeof prompt !== 'string' || !prompt) return ex.json(400, errorBody("Missing required parameter: 'prompt'.", 'invalid_request_error', 'prompt'));
    const count = Number(body.n ?? 1);
    if (!Number.isInteger(count) || count < 1 || count > 10)
      return ex.json(400, errorBody("Invalid 'n': expected an integer from 1 to 10.", 'invalid_request_error', 'n'));
    const size = body.size === undefined || body.size === 'auto' ? '1024x1024' : String(body.size);
    const dims = /^(\d+)x(\d+)$/.exec(size)?.slice(1).map(Number);
    if (!dims || dims.some((d) => d < 256 || d > 4096)) return ex.json(400, errorBody(`Invalid 'size': ${size}.`, 'invalid_request_error', 'size'));
    const format = ['png', 'jpeg', 'webp'].includes(String(body.output_format)) ? String(body.output_format) : 'png';
    let inputImages = 0;
    if (edit) {
      const sources = editSources(body);
      if (sources.length === 0) return ex.json(400, errorBody("Missing required parameter: 'image'.", 'invalid_request_error', 'image'));
      for (const source of sources) {
        if (!(await isImage(source)))
          return ex.json(
            400,
            errorBody('Invalid image file or mode for image 1, please check your image file.', 'invalid_request_error', 'image', 'invalid_image_file'),
          );
      }
      inputImages = sources.length;
    }
    const b64 = await imageB64(dims[0]!, dims[1]!, format);
    const model = String(body.model ?? (edit ? 'dall-e-2' : 'dall-e-3'));
    const quality = ['low', 'medium', 'high'].includes(String(body.quality)) ? String(body.quality) : 'medium';
    const gptImage = /^(gpt-image|chatgpt-image)/.test(model);
    const text = Math.ceil(prompt.length / 4);
    const out = Math.round(OPENAI_IMAGE_OUTPUT_TOKENS[quality]! * (dims[0] === dims[1] ? 1 : 1.5)) * count;
    const image = inputImages * OPENAI_IMAGE_INPUT_TOKENS;
    return ex.json(200, {
      created: Math.floor(Date.now() / 1000),
      data: Array.from({ length: count }, () => ({ b64_json: b64 })),
      ...(gptImage && {
        background: 'opaque',
        output_format: format,
        quality,
        size,
        usage: {
          input_tokens: text + image,
          input_tokens_details: { text_tokens: text, image_tokens: image },
          output_tokens: out,
          total_tokens: text + image + out,
        },
      }),
    });
  }

  function imageB64(width: number, height: number, format: string): Promise<string> {
    const key = `${width}x${height}.${format}`;
    let cached = images.get(key);
    if (!cached) {
      const canvas = sharp({ create: { width, height, channels: 3, background: { r: 40, g: 120, b: 200 } } });
      const encoded = format === 'jpeg' ? canvas.jpeg() : format === 'webp' ? canvas.webp() : canvas.png();
      cached = encoded.toBuffer().then((bytes) => bytes.toString('base64'));
      images.set(key, cached);
    }
    return cached;
  }

  const double = await startDoubleServer({
    errorBody: (status, message) => errorBody(message, ...errorTypeFor(status)),
    headers: () => ({ 'x-request-id': `req_${idSuffix(`request ${++answered}`, 32)}`, 'openai-processing-ms': '1' }),
    handle,
  });
  return Object.assign(double, { clearCache: () => cache.clear() });
}

interface Turn {
  reasoning: number;
  /** Streamed pieces of the text or of the call's arguments: one per output token. */
  pieces: string[];
  call: { name: string; arguments: string } | null;
  cut: boolean;
  /** All output tokens, reasoning included. */
  output: number;
}

/** The images of an edit: multipart files (image, image[]), or JSON `images[].image_url` / `image`. */
function editSources(body: Body): (RecordedFile | string)[] {
  const files = [body.image, body['image[]']].flat().filter((f): f is RecordedFile => isObject(f) && Buffer.isBuffer(f.bytes));
  if (files.length > 0) return files;
  const urls = asArray(body.images).map((i) => (isObject(i) ? i.image_url : undefined));
  if (typeof body.image === 'string') urls.push(body.image);
  return urls.filter((u): u is string => typeof u === 'string');
}

/** Files and data URLs must decode as images; remote URLs are taken on trust. */
async function isImage(source: RecordedFile | string): Promise<boolean> {
  if (typeof source === 'string' && /^https?:\/\//.test(source)) return true;
  const bytes = typeof source === 'string' ? Buffer.from(/^data:image\/[\w.+-]+;base64,(.*)$/s.exec(source)?.[1] ?? '', 'base64') : source.bytes;
  if (bytes.length === 0) return false;
  return sharp(bytes)
    .metadata()
    .then(
      (m) => Boolean(m.format),
      () => false,
    );
}

function invalidChat(body: Body): { message: string; param: string } | null {
  if (typeof body.model !== 'string' || !body.model) return { message: "Missing required parameter: 'model'.", param: 'model' };
  if (!Array.isArray(body.messages) || body.messages.length === 0)
    return { message: "Invalid 'messages': empty array. Expected an array with minimum length 1.", param: 'messages' };
  for (const [i, m] of body.messages.entries()) {
    if (!isObject(m) || !['system', 'developer', 'user', 'assistant', 'tool'].includes(String(m.role))) {
      return { message: `Invalid value for 'messages[${i}].role'.`, param: `messages[${i}].role` };
    }
  }
  for (const param of ['max_tokens', 'max_completion_tokens']) {
    const value = body[param];
    if (value !== undefined && value !== null && !(Number.isInteger(value) && Number(value) >= 1))
      return { message: `Invalid '${param}': expected a positive integer.`, param };
  }
  return invalidEffort(body.reasoning_effort, 'reasoning_effort');
}

function invalidResponses(body: Body): { message: string; param: string } | null {
  if (typeof body.model !== 'string' || !body.model) return { message: "Missing required parameter: 'model'.", param: 'model' };
  if (typeof body.input !== 'string' && !Array.isArray(body.input)) return { message: "Missing required parameter: 'input'.", param: 'input' };
  const max = body.max_output_tokens;
  if (max !== undefined && max !== null && !(Number.isInteger(max) && Number(max) >= 16)) {
    return {
      message: `Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got ${String(max)} instead.`,
      param: 'max_output_tokens',
    };
  }
  return isObject(body.reasoning) ? invalidEffort(body.reasoning.effort, 'reasoning.effort') : null;
}

function invalidEffort(effort: unknown, param: string): { message: string; param: string } | null {
  if (effort === undefined || effort === null || (typeof effort === 'string' && effort in OPENAI_REASONING_TOKENS)) return null;
  return { message: `Invalid value for '${param}': ${String(effort)}.`, param };
}

function errorBody(message: string, type: string, param: string | null = null, code: string | null = null) {
  return { error: { message, type, param, code } };
}

function errorTypeFor(status: number): [string, string | null, string | null] {
  if (status === 401) return ['invalid_request_error', null, 'invalid_api_key'];
  if (status === 429) return ['requests', null, 'rate_limit_exceeded'];
  if (status >= 500) return ['server_error', null, null];
  return ['invalid_request_error', null, null];
}

function data(payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

function named(event: string, payload: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(payload)}\n\n`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}
