// A local Vertex AI as Google's and Anthropic's Vertex clients expect it, in one project and
// location, with Google's OAuth in front:
// - POST /v1/token: a Security Token Service exchange (what google-auth-library does for workload
//   identity federation credentials, whose token_url is part of the credentials JSON): the right
//   subject token gets a bearer token, anything else a 400 invalid_grant;
// - /{version}/projects/{p}/locations/{l}/publishers/google/models/{model}:{method}: Gemini on
//   Vertex, answered by an inner Gemini double (support/gemini-double.ts), and its embeddings
//   (:predict, :embedContent) answered here, with their token counts;
// - /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{model}:rawPredict and
//   :streamRawPredict (and count-tokens:rawPredict): Anthropic's Messages with the model in the path
//   and `anthropic_version: vertex-2023-10-16` in the body, answered by an inner Anthropic double.
// Every model route wants `authorization: Bearer <a token this double issued>`. Faults scripted on
// this double apply before the inner doubles are asked.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDoubleServer, type DoubleHandle, type Exchange } from './double-http.ts';
import { geminiEmbeddingOf, startGeminiDouble, type GeminiDouble } from './gemini-double.ts';
import { countTextTokens } from '../../src/upstream/tokenizer.ts';
import { startAnthropicDouble, type AnthropicDouble, type AnthropicDoubleOptions } from './anthropic-double.ts';

export const VERTEX_PROJECT = 'tollgate-test-project';
export const VERTEX_LOCATION = 'us-east5';
export const VERTEX_EMBEDDING_DIMENSIONS = 768;
const INNER_GEMINI_KEY = 'vertex-inner-gemini-key';
const INNER_ANTHROPIC_KEY = 'vertex-inner-anthropic-key';

type Json = Record<string, any>;

export interface VertexDouble extends DoubleHandle {
  /** Every model call: publisher, model, method, as the path named them (refused ones included). */
  readonly seen: { publisher: string; model: string; method: string }[];
  /** The tokens each embedded text was counted, in order. */
  readonly embeddingTokens: number[];
  /** Token exchanges answered (successful or not). */
  readonly tokenExchanges: number;
  /** Credentials JSON (workload identity federation) that google-auth-library turns into this double's tokens. */
  credentials(subjectToken?: string): Record<string, unknown>;
  gemini: GeminiDouble;
  anthropic: AnthropicDouble;
  close(): Promise<void>;
}

const googleError = (code: number, status: string, message: string) => ({ error: { code, message, status } });

export async function startVertexDouble(options: { reply?: string; anthropic?: Omit<AnthropicDoubleOptions, 'apiKey'> } = {}): Promise<VertexDouble> {
  const gemini = await startGeminiDouble({ apiKey: INNER_GEMINI_KEY, ...(options.reply !== undefined && { reply: options.reply }) });
  const anthropic = await startAnthropicDouble({ apiKey: INNER_ANTHROPIC_KEY, ...options.anthropic });
  const subject = `subject-${randomBytes(8).toString('hex')}`;
  const issued = new Set<string>();
  const seen: VertexDouble['seen'] = [];
  const embeddingTokens: number[] = [];
  let tokenExchanges = 0;
  const dir = mkdtempSync(join(tmpdir(), 'vertex-double-'));

  // The STS endpoint: a plain server, since its body is a form, not JSON.
  const sts: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => (raw += chunk));
    req.on('end', () => {
      tokenExchanges++;
      const form = new URLSearchParams(raw);
      const ok =
        req.url === '/v1/token' &&
        form.get('grant_type') === 'urn:ietf:params:oauth:grant-type:token-exchange' &&
        form.get('subject_token') === subject &&
        (form.get('scope') ?? '').split(' ').includes('https://www.googleapis.com/auth/cloud-platform');
      res.setHeader('content-type', 'application/json');
      if (!ok) {
        res.statusCode = 400;
        return res.end(JSON.stringify({ error: 'invalid_grant', error_description: 'The subject token is invalid.' }));
      }
      const token = `ya29.${randomBytes(24).toString('base64url')}`;
      issued.add(token);
      res.end(
        JSON.stringify({ access_token: token, issued_token_type: 'urn:ietf:params:oauth:token-type:access_token', token_type: 'Bearer', expires_in: 3600 }),
      );
    });
  });
  await new Promise<void>((resolve) => sts.listen(0, '127.0.0.1', resolve));
  const stsUrl = `http://127.0.0.1:${(sts.address() as AddressInfo).port}/v1/token`;

  const MODEL_ROUTE = /^\/(v1|v1beta1)\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/(google|anthropic)\/models\/([^/:]+):([A-Za-z]+)$/;

  /** The inner double's answer, passed on as it comes (status, content type, the body streamed). */
  async function relay(ex: Exchange, url: string, headers: Record<string, string>, body: Json): Promise<void> {
    const gone = new AbortController();
    ex.res.on('close', () => gone.abort());
    try {
      const answer = await fetch(url, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: gone.signal,
      });
      ex.res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
      for await (const chunk of answer.body as unknown as AsyncIterable<Uint8Array>) ex.res.write(chunk);
      ex.res.end();
    } catch {
      // The client left: the inner answer is dropped with it.
      ex.res.destroy();
    }
  }

  async function handle(ex: Exchange): Promise<void> {
    const { req, path, body } = ex;
    const route = req.method === 'POST' ? MODEL_ROUTE.exec(path) : null;
    if (!route) return ex.json(404, googleError(404, 'NOT_FOUND', 'The requested URL was not found on this server.'));
    const [, version, project, location, publisher, rawModel, method] = route as unknown as string[];
    const model = decodeURIComponent(rawModel!);
    seen.push({ publisher: publisher!, model, method: method! });
    const token = /^Bearer (\S+)$/.exec(String(req.headers.authorization ?? ''))?.[1];
    if (!token || !issued.has(token))
      return ex.json(401, googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials. Expected OAuth 2 access token.'));
    if (project !== VERTEX_PROJECT || location !== VERTEX_LOCATION)
      return ex.json(403, googleError(403, 'PERMISSION_DENIED', `Permission denied on resource project ${project}.`));
    if (ex.invalidJson) return ex.json(400, googleError(400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.'));
    const alt = new URL(req.url ?? '/', 'http://double').searchParams.get('alt');

    if (publisher === 'google' && (method === 'predict' || method === 'embedContent')) return embed(ex, method, body);
    if (publisher === 'google') {
      const query = alt ? `?alt=${alt}` : '';
      return relay(ex, `${gemini.url}/v1beta/models/${encodeURIComponent(model)}:${method}${query}`, { 'x-goog-api-key': INNER_GEMINI_KEY }, body);
    }
    if (version !== 'v1') return ex.json(404, googleError(404, 'NOT_FOUND', `Publisher model not found under ${version}.`));
    // Anthropic on Vertex: the version in the body, never a model there.
    // Vertex documents vertex-2023-10-16; the official client copies its own API version header there.
    if (!/^(vertex-)?\d{4}-\d{2}-\d{2}$/.test(String(body.anthropic_version)) || ('model' in body && model !== 'count-tokens'))
      return ex.json(400, {
        type: 'error',
        error: { type: 'invalid_request_error', message: 'anthropic_version: required in the body; model: belongs in the path' },
      });
    const { anthropic_version: _version, ...messages } = body;
    const headers = { 'x-api-key': INNER_ANTHROPIC_KEY, 'anthropic-version': '2023-06-01', ...betaOf(req.headers['anthropic-beta']) };
    if (model === 'count-tokens' && method === 'rawPredict') return relay(ex, `${anthropic.url}/v1/messages/count_tokens`, headers, messages);
    if (method === 'rawPredict' && messages.stream === true)
      return ex.json(400, { type: 'error', error: { type: 'invalid_request_error', message: 'stream: use streamRawPredict' } });
    if (method !== 'rawPredict' && method !== 'streamRawPredict') return ex.json(404, googleError(404, 'NOT_FOUND', `Method ${method} not found.`));
    return relay(ex, `${anthropic.url}/v1/messages`, headers, { ...messages, model });
  }

  /**
   * Vertex's embeddings, which count their tokens (as the gateway's tokenizer counts the text):
   * :predict (instances of text, predictions with statistics.token_count) and :embedContent (one
   * content, usageMetadata.promptTokenCount).
   */
  async function embed(ex: Exchange, method: string, body: Json): Promise<void> {
    const predict = method === 'predict';
    const texts: unknown[] = predict ? (Array.isArray(body.instances) ? body.instances : []).map((i: Json) => i?.content) : [body.content?.parts?.[0]?.text];
    if (texts.length === 0 || texts.some((t) => typeof t !== 'string' || t === ''))
      return ex.json(400, googleError(400, 'INVALID_ARGUMENT', 'Every instance needs a content.'));
    const dimensions = (predict ? body.parameters?.outputDimensionality : body.embedContentConfig?.outputDimensionality) ?? VERTEX_EMBEDDING_DIMENSIONS;
    const made = (texts as string[]).map((text) => ({ values: geminiEmbeddingOf(text, dimensions), tokens: countTextTokens(text) }));
    embeddingTokens.push(...made.map((m) => m.tokens));
    if (predict)
      return ex.json(200, { predictions: made.map((m) => ({ embeddings: { values: m.values, statistics: { token_count: m.tokens, truncated: false } } })) });
    return ex.json(200, { embedding: { values: made[0]!.values }, usageMetadata: { promptTokenCount: made[0]!.tokens }, truncated: false });
  }

  const front = await startDoubleServer({
    errorBody: (status, message) => googleError(status, status === 429 ? 'RESOURCE_EXHAUSTED' : status >= 500 ? 'UNAVAILABLE' : 'FAILED_PRECONDITION', message),
    headers: () => ({ 'x-vertex-request-id': randomBytes(8).toString('hex') }),
    handle,
  });

  return {
    ...front,
    get abandoned() {
      return front.abandoned;
    },
    get calls() {
      return front.calls;
    },
    get tokenExchanges() {
      return tokenExchanges;
    },
    seen,
    embeddingTokens,
    gemini,
    anthropic,
    credentials(subjectToken = subject) {
      const file = join(dir, `subject-${randomBytes(4).toString('hex')}`);
      writeFileSync(file, subjectToken);
      return {
        type: 'external_account',
        audience: '//iam.googleapis.com/projects/123456789/locations/global/workloadIdentityPools/tollgate/providers/test',
        subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
        token_url: stsUrl,
        credential_source: { file },
      };
    },
    close: async () => {
      await front.close();
      await new Promise<void>((resolve) => sts.close(() => resolve()));
      await gemini.close();
      await anthropic.close();
    },
  };
}

const betaOf = (value: string | string[] | undefined): Record<string, string> =>
  value === undefined ? {} : { 'anthropic-beta': Array.isArray(value) ? value.join(',') : value };
