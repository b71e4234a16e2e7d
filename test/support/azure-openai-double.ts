// A local Azure OpenAI resource as the `openai` package's AzureOpenAI client expects it:
// POST /openai/deployments/{deployment}/chat/completions?api-version=…, authenticated by the
// `api-key` header, plain and SSE, with Azure's own additions to OpenAI's shapes: the prompt's
// `prompt_filter_results` (a first stream chunk with no id and no choices, as Azure sends it),
// each choice's `content_filter_results`, usage details (cached and reasoning tokens), Azure's
// error bodies ({error:{code, message}}) and its content filter refusing a prompt (HTTP 400,
// code content_filter, innererror.content_filter_result).
//
// The answers and the token counts are the OpenAI double's (see openai-double.ts: the reply,
// tool calls, structured output, prompt caching, reasoning tokens): this double checks what is
// Azure's, then asks its own OpenAI double with the deployment as the model and dresses the
// answer the way Azure does. Faults are scripted on this double and apply to its answers.
import { randomUUID } from 'node:crypto';
import { startDoubleServer, type DoubleHandle, type Exchange } from './double-http.ts';
import { startOpenAIDouble, type OpenAIDouble, type OpenAIDoubleOptions } from './openai-double.ts';

export interface AzureOpenAIDoubleOptions extends Omit<OpenAIDoubleOptions, 'apiKey'> {
  /** The key the `api-key` header must carry (default 'test-azure-key'). */
  apiKey?: string;
  /** The api-versions the resource serves (default: AZURE_API_VERSION only). */
  apiVersions?: string[];
}

export interface AzureOpenAIDouble extends DoubleHandle {
  /** Every served call's deployment and api-version, in order (refused ones included). */
  readonly seen: { deployment: string; apiVersion: string | null }[];
  /** The usage of every completed reply, as sent (the stream's usage chunk for streams). */
  readonly usages: Record<string, any>[];
  clearCache(): void;
}

export const AZURE_API_VERSION = '2024-10-21';
/** A prompt containing this is refused by the double's content filter (category hate). */
export const AZURE_FILTERED_WORD = 'FILTER-ME-PLEASE';

const INNER_KEY = 'azure-double-inner-key';
const SAFE = { filtered: false, severity: 'safe' };
const CONTENT_FILTER_RESULTS = { hate: SAFE, self_harm: SAFE, sexual: SAFE, violence: SAFE };
const PROMPT_FILTER_RESULTS = [{ prompt_index: 0, content_filter_results: { ...CONTENT_FILTER_RESULTS, jailbreak: { filtered: false, detected: false } } }];
const CHAT_PATH = /^\/openai\/deployments\/([^/]+)\/chat\/completions$/;

type Json = Record<string, any>;

const azureError = (code: string, message: string, extra: Json = {}) => ({ error: { code, message, ...extra } });

/** Azure's refusal of a prompt its content filter flagged. */
function contentFilterError(): Json {
  return azureError(
    'content_filter',
    "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.",
    {
      param: 'prompt',
      status: 400,
      innererror: {
        code: 'ResponsibleAIPolicyViolation',
        content_filter_result: { ...CONTENT_FILTER_RESULTS, hate: { filtered: true, severity: 'high' }, jailbreak: { filtered: false, detected: false } },
      },
    },
  );
}

/** Azure's dress on a chat completion or chunk: filter results on every choice. */
function withChoiceFilters(json: Json): Json {
  if (!Array.isArray(json.choices)) return json;
  return { ...json, choices: json.choices.map((choice: Json) => ({ ...choice, content_filter_results: CONTENT_FILTER_RESULTS })) };
}

export async function startAzureOpenAIDouble(options: AzureOpenAIDoubleOptions = {}): Promise<AzureOpenAIDouble> {
  const apiKey = options.apiKey ?? 'test-azure-key';
  const versions = new Set(options.apiVersions ?? [AZURE_API_VERSION]);
  const inner: OpenAIDouble = await startOpenAIDouble({ ...options, apiKey: INNER_KEY });
  const seen: AzureOpenAIDouble['seen'] = [];
  const usages: Json[] = [];

  async function handle(ex: Exchange): Promise<void> {
    const { req, path, body } = ex;
    if (req.headers['api-key'] !== apiKey) {
      return ex.json(
        401,
        azureError(
          '401',
          'Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.',
        ),
      );
    }
    const route = req.method === 'POST' ? CHAT_PATH.exec(path) : null;
    const apiVersion = new URL(req.url ?? '/', 'http://double').searchParams.get('api-version');
    if (route) seen.push({ deployment: decodeURIComponent(route[1]!), apiVersion });
    if (!route || apiVersion === null || !versions.has(apiVersion)) return ex.json(404, azureError('404', 'Resource not found'));
    if (ex.invalidJson) return ex.json(400, azureError('BadRequest', 'Invalid JSON body.'));
    if (JSON.stringify(body.messages ?? []).includes(AZURE_FILTERED_WORD)) return ex.json(400, contentFilterError());

    const gone = new AbortController();
    ex.res.on('close', () => gone.abort());
    const answer = await fetch(`${inner.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${INNER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, model: route[1] }),
      signal: gone.signal,
    });
    if (body.stream !== true || !answer.ok) {
      const json = (await answer.json()) as Json;
      if (!answer.ok) return ex.json(answer.status, json);
      usages.push(json.usage);
      return ex.json(200, { ...withChoiceFilters(json), prompt_filter_results: PROMPT_FILTER_RESULTS });
    }
    const sse = ex.sse(() =>
      frame({ error: { code: 'server_error', message: 'The server had an error while processing your request.', param: null, type: null } }),
    );
    // Azure's first chunk: only the prompt's filter results, with an empty id and no choices.
    await sse.event(frame({ choices: [], created: 0, id: '', model: '', object: '', prompt_filter_results: PROMPT_FILTER_RESULTS }));
    try {
      for await (const data of sseData(answer.body!)) {
        if (data === '[DONE]') return await sse.end('data: [DONE]\n\n');
        const chunk = JSON.parse(data) as Json;
        if (chunk.usage) usages.push(chunk.usage);
        if (!(await sse.event(frame(withChoiceFilters(chunk))))) return;
      }
    } catch {
      // The client left (or a fault cut the stream): the inner answer is dropped with it.
    }
  }

  const handle_ = await startDoubleServer({
    errorBody: (status, message) => azureError(String(status), message),
    headers: () => ({ 'apim-request-id': randomUUID(), 'x-request-id': randomUUID(), 'x-ms-region': 'Sweden Central' }),
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
    clearCache: () => inner.clearCache(),
    close: async () => {
      await handle_.close();
      await inner.close();
    },
  };
}

/** The data of each event of an SSE body, as it arrives. */
export async function* sseData(body: ReadableStream<BufferSource>): AsyncGenerator<string> {
  let buffer = '';
  for await (const piece of body.pipeThrough(new TextDecoderStream())) {
    buffer += piece;
    const events = buffer.split('\n\n');
    buffer = events.pop()!;
    for (const event of events) yield event.replace(/^data: /, '');
  }
}

function frame(payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}
