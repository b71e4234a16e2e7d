// A local Amazon Bedrock Runtime endpoint as the official @aws-sdk/client-bedrock-runtime calls it
// with `new BedrockRuntimeClient({ region: 'us-east-1', endpoint: double.url, credentials, maxAttempts: 1 })`:
// POST /model/{modelId}/converse (JSON), /model/{modelId}/converse-stream (binary event stream) and
// /model/{modelId}/invoke for Titan Text Embeddings V2 ({inputText} in, {embedding, inputTextTokenCount} out),
// SigV4-signed. The client speaks HTTP/2 by default (its NodeHttp2Handler, cleartext with prior
// knowledge against an http:// endpoint) and HTTP/1.1 with a NodeHttpHandler: one port serves both.
//
// The signature is checked for real (bedrock-wire.ts): an unknown access key id (or session token)
// is 403 UnrecognizedClientException, a signature made with another secret, scope or body 403
// InvalidSignatureException. An unknown model id is 400 ValidationException "The provided model
// identifier is invalid."; a request Bedrock would refuse is a 400 ValidationException
// (bedrock-turn.ts's checks).
//
// Answers (bedrock-turn.ts): reasoning first when additionalModelRequestFields.thinking (or
// reasoning_config) is enabled, then a toolUse when tools are declared (input an instance of the
// tool's schema, or `toolUse`), or the reply text, or JSON valid against outputConfig.textFormat's
// schema; cut at inferenceConfig.maxTokens (stopReason max_tokens), before a stop sequence
// (stop_sequence). Usage and prompt caching (cachePoint blocks) as AWS documents them: inputTokens
// is only the input after the last cache point. A stream: messageStart, contentBlockStart for a
// toolUse only, one contentBlockDelta per output token (a reasoning block ends with its
// signature), contentBlockStop, messageStop, metadata (usage, metrics).
//
// Faults (FaultScript, one per request, any route): a status fault answers Bedrock's error for that
// status (x-amzn-errortype + {"message"}); garbage is a truncated JSON body or a frame with a bad
// checksum; cutAfterEvents cuts a stream after that many frames (HTTP/2: the stream is reset);
// errorEventAfter ends it with an exception frame (`exception`, default modelStreamErrorException);
// stallAfter leaves it silent after that many frames until the client leaves.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { constants as h2, createServer as createH2Server, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { FaultScript, type Fault } from './double-faults.ts';
import { BEDROCK_MODELS, bedrockTextTokens, composeTurn, inputUsage, invalidConverse, type Turn, type TurnOptions } from './bedrock-turn.ts';
import { geminiEmbeddingOf } from './gemini-double.ts';
import {
  BEDROCK_ACCESS_KEY_ID,
  BEDROCK_REGION,
  BEDROCK_SECRET_ACCESS_KEY,
  bedrockErrorFor,
  corruptFrame,
  errorTypeHeader,
  eventFrame,
  exceptionFrame,
  sigV4Problem,
  validationError,
  type BedrockError,
  type BedrockStreamException,
} from './bedrock-wire.ts';

export * from './bedrock-turn.ts';
export * from './bedrock-wire.ts';

export interface BedrockFault extends Fault {
  /** The exception frame errorEventAfter sends (default modelStreamErrorException). */
  exception?: BedrockStreamException;
  /** Streams: after this many frames, send nothing more until the client leaves. */
  stallAfter?: number;
}

export interface BedrockDoubleOptions extends TurnOptions {
  accessKeyId?: string;
  secretAccessKey?: string;
  /** Temporary credentials: requests must carry this x-amz-security-token. */
  sessionToken?: string;
  /** The region the signature must be scoped to (default us-east-1). */
  region?: string;
  /** The model ids served (default BEDROCK_MODELS). */
  models?: string[];
}

export interface BedrockRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The JSON body as received ({} when it did not parse). */
  body: Record<string, any>;
  /** 'HTTP/2' or 'HTTP/1.1'. */
  protocol: string;
}

export interface BedrockDouble {
  /** The endpoint to give the client (http://127.0.0.1:port). */
  url: string;
  /** Every request, in order (refused ones included). */
  readonly requests: BedrockRequest[];
  /** Every Converse/ConverseStream call's model id and operation, in order (refused ones included). */
  readonly seen: { modelId: string; operation: 'Converse' | 'ConverseStream' | 'InvokeModel' }[];
  /** The inputTextTokenCount of every text embedded (InvokeModel on Titan), in order. */
  readonly embeddingTokens: number[];
  /** The usage of every completed reply, as sent (a stream's metadata usage). */
  readonly usages: Record<string, any>[];
  readonly calls: number;
  /** Responses the client left before they were complete (cuts made by a fault are not counted). */
  readonly abandoned: number;
  script(...faults: BedrockFault[]): void;
  setDefault(fault: BedrockFault | null): void;
  clearCache(): void;
  close(): Promise<void>;
}

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;
type Json = Record<string, any>;

const ROUTE = /^\/model\/([^/]+)\/(converse|converse-stream|invoke)$/;
/** Titan Text Embeddings V2: the dimensions it makes (1,024 unless asked). */
const TITAN_DIMENSIONS = new Set([256, 512, 1024]);

export async function startBedrockDouble(options: BedrockDoubleOptions = {}): Promise<BedrockDouble> {
  const identity = {
    accessKeyId: options.accessKeyId ?? BEDROCK_ACCESS_KEY_ID,
    secretAccessKey: options.secretAccessKey ?? BEDROCK_SECRET_ACCESS_KEY,
    sessionToken: options.sessionToken,
    region: options.region ?? BEDROCK_REGION,
  };
  const models = new Set(options.models ?? BEDROCK_MODELS);
  const faults = new FaultScript();
  const cache = new Set<string>();
  const requests: BedrockRequest[] = [];
  const seen: BedrockDouble['seen'] = [];
  const usages: Json[] = [];
  const embeddingTokens: number[] = [];
  const cut = new WeakSet<Res>();
  let calls = 0;
  let abandoned = 0;
  let served = 0;

  async function serve(req: Req, res: Res): Promise<void> {
    const started = Date.now();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    calls++;
    const path = (req.url ?? '/').split('?')[0]!;
    const body = parseJson(raw);
    requests.push({ method: req.method ?? 'GET', path, headers: req.headers, body: body ?? {}, protocol: `HTTP/${req.httpVersion}` });
    // Ended by the double (an HTTP/2 response also 'finish'es when the client resets its stream).
    res.on('close', () => {
      if (!res.writableEnded && !cut.has(res)) abandoned++;
    });
    const fault = faults.take() as BedrockFault;
    const common = { 'x-amzn-requestid': randomUUID() };
    const fail = (error: BedrockError, extra: Record<string, string> = {}) =>
      sendJson(res, error.status, { message: error.message }, { ...common, ...errorTypeHeader(error.type), ...extra });

    if (fault.firstByteDelayMs) await sleep(fault.firstByteDelayMs);
    if (gone(res)) return;
    if (fault.hang) {
      if (!gone(res)) await new Promise((resolve) => res.once('close', resolve));
      return;
    }
    if (fault.status) {
      const error = bedrockErrorFor(fault.status);
      if (fault.body === undefined) return fail(error, fault.headers);
      return sendJson(res, fault.status, fault.body, { ...common, ...errorTypeHeader(error.type), ...fault.headers });
    }
    const route = req.method === 'POST' ? ROUTE.exec(path) : null;
    if (!route) return fail({ status: 404, type: 'UnknownOperationException', message: `No operation at ${req.method} ${path}` });
    const modelId = decodeURIComponent(route[1]!);
    const streamed = route[2] === 'converse-stream';
    seen.push({ modelId, operation: route[2] === 'invoke' ? 'InvokeModel' : streamed ? 'ConverseStream' : 'Converse' });
    const refused = await sigV4Problem({ method: req.method ?? 'POST', url: req.url ?? '/', headers: req.headers, body: raw }, identity);
    if (refused) return fail(refused);
    if (!body) return fail({ status: 400, type: 'SerializationException', message: 'Unable to parse the request body as JSON.' });
    if (!models.has(modelId)) return fail(validationError('The provided model identifier is invalid.'));
    if (route[2] === 'invoke') {
      // Titan Text Embeddings V2's body: one inputText, its own token count in the reply.
      const dimensions = body.dimensions ?? 1024;
      if (!/^amazon\.titan-embed-text-v2/.test(modelId)) return fail(validationError('This double invokes amazon.titan-embed-text-v2 models only.'));
      if (typeof body.inputText !== 'string' || body.inputText === '')
        return fail(validationError('Malformed input request: #: required key [inputText] not found'));
      if (!TITAN_DIMENSIONS.has(dimensions)) return fail(validationError(`Malformed input request: #/dimensions: ${dimensions} is not a valid enum value`));
      const tokens = bedrockTextTokens(body.inputText);
      embeddingTokens.push(tokens);
      return sendJson(res, 200, { embedding: geminiEmbeddingOf(body.inputText, dimensions), embeddingsByType: {}, inputTextTokenCount: tokens }, common);
    }
    const problem = invalidConverse(body);
    if (problem) return fail(validationError(problem));

    const n = ++served;
    const turn = composeTurn(body, modelId, n, options);
    const input = inputUsage(cache, modelId, body);
    const all = Number(input.inputTokens) + Number(input.cacheReadInputTokens ?? 0) + Number(input.cacheWriteInputTokens ?? 0);
    const usage = { ...input, outputTokens: turn.outputTokens, totalTokens: all + turn.outputTokens };
    const metrics = () => ({ latencyMs: Math.max(1, Date.now() - started) });

    if (fault.garbage) {
      if (!streamed) return sendJson(res, 200, '{"output": {"message": {"role": "assistant", "content": [', common);
      res.writeHead(200, { ...common, 'content-type': 'application/vnd.amazon.eventstream' });
      return void res.end(corruptFrame());
    }
    if (!streamed) {
      const reply = { output: { message: { role: 'assistant', content: turn.blocks } }, stopReason: turn.stopReason, usage, metrics: metrics() };
      if (fault.cutAfterEvents === undefined) {
        usages.push(usage);
        return sendJson(res, 200, reply, common);
      }
      const text = JSON.stringify(reply);
      res.writeHead(200, { ...common, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
      await write(res, text.slice(0, Math.floor(text.length / 2)));
      cut.add(res);
      return abort(res);
    }
    const writer = new FrameWriter(res, fault, common, () => cut.add(res));
    await streamTurn(writer, turn);
    if (!writer.open) return;
    await writer.event('metadata', { usage, metrics: metrics() });
    if (await writer.end()) usages.push(usage);
  }

  const handler = (req: Req, res: Res) => {
    serve(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { message: `double crashed: ${String(error)}` }, errorTypeHeader('InternalServerException'));
      else abort(res);
    });
  };
  const server = await listenHttp1And2(handler);
  return {
    url: server.url,
    requests,
    seen,
    usages,
    embeddingTokens,
    get calls() {
      return calls;
    },
    get abandoned() {
      return abandoned;
    },
    script: (...list) => faults.script(...list),
    setDefault: (fault) => faults.setDefault(fault),
    clearCache: () => cache.clear(),
    close: server.close,
  };
}

/** A turn as ConverseStream events: messageStart, each block's start/deltas/stop, messageStop. */
async function streamTurn(writer: FrameWriter, turn: Turn): Promise<void> {
  await writer.event('messageStart', { role: 'assistant' });
  for (const [contentBlockIndex, block] of turn.blocks.entries()) {
    if (!writer.open) return;
    if (block.toolUse) {
      const { toolUseId, name } = block.toolUse;
      await writer.event('contentBlockStart', { contentBlockIndex, start: { toolUse: { toolUseId, name } } });
    }
    for (const piece of turn.pieces[contentBlockIndex]!) {
      if (!writer.open) return;
      const delta = block.toolUse ? { toolUse: { input: piece } } : block.reasoningContent ? { reasoningContent: { text: piece } } : { text: piece };
      await writer.event('contentBlockDelta', { contentBlockIndex, delta });
    }
    if (block.reasoningContent) {
      await writer.event('contentBlockDelta', {
        contentBlockIndex,
        delta: { reasoningContent: { signature: block.reasoningContent.reasoningText.signature } },
      });
    }
    await writer.event('contentBlockStop', { contentBlockIndex });
  }
  if (writer.open) await writer.event('messageStop', { stopReason: turn.stopReason });
}

/** Writes event-stream frames one by one, applying cutAfterEvents, errorEventAfter and chunkDelayMs. */
class FrameWriter {
  #sent = 0;
  #lastWrite: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(
    private readonly res: Res,
    private readonly fault: BedrockFault,
    headers: Record<string, string>,
    private readonly markCut: () => void,
  ) {
    res.writeHead(200, { ...headers, 'content-type': 'application/vnd.amazon.eventstream' });
  }

  get open(): boolean {
    return !this.#stopped && !gone(this.res);
  }

  async event(type: string, payload: Json): Promise<boolean> {
    if (!(await this.#mayContinue())) return false;
    const frame = eventFrame(type, payload, this.#sent);
    this.#lastWrite = write(this.res, frame);
    this.#sent++;
    if (this.fault.chunkDelayMs) await sleep(this.fault.chunkDelayMs);
    return this.open;
  }

  /** True when the stream ended whole. */
  async end(): Promise<boolean> {
    if (!(await this.#mayContinue())) return false;
    this.#stopped = true;
    await new Promise<void>((resolve) => this.res.end(() => resolve()));
    return true;
  }

  async #mayContinue(): Promise<boolean> {
    if (!this.open) return false;
    if (this.fault.errorEventAfter === this.#sent) {
      this.#stopped = true;
      this.res.end(exceptionFrame(this.fault.exception ?? 'modelStreamErrorException'));
      return false;
    }
    if (this.fault.stallAfter === this.#sent) {
      this.#stopped = true;
      if (!gone(this.res)) await new Promise((resolve) => this.res.once('close', resolve));
      return false;
    }
    if (this.fault.cutAfterEvents === this.#sent) {
      this.#stopped = true;
      await this.#lastWrite; // what was sent reaches the client before the cut
      this.markCut();
      abort(this.res);
      return false;
    }
    return true;
  }
}

/** The client left (or the response was cut). */
function gone(res: Res): boolean {
  return 'stream' in res ? res.stream.destroyed || res.stream.closed : res.destroyed;
}

/** Write a piece; resolves once it is handed to the socket. */
function write(res: Res, data: string | Uint8Array): Promise<void> {
  const writable = res as { write(chunk: string | Uint8Array, done: () => void): boolean };
  return new Promise((resolve) => writable.write(data, () => resolve()));
}

/** Break the response off: HTTP/1.1 drops the connection, HTTP/2 resets the stream. */
function abort(res: Res): void {
  if ('stream' in res) res.stream.close(h2.NGHTTP2_INTERNAL_ERROR);
  else res.destroy();
}

/** A string body is sent verbatim, so faults can send malformed JSON. */
function sendJson(res: Res, status: number, body: unknown, headers: Record<string, string>): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}

function parseJson(raw: Buffer): Json | null {
  if (raw.length === 0) return {};
  try {
    const parsed: unknown = JSON.parse(raw.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Json) : null;
  } catch {
    return null;
  }
}

/**
 * One port for HTTP/1.1 and cleartext HTTP/2 (prior knowledge): a connection that opens with the
 * HTTP/2 preface ("PRI * HTTP/2.0") goes to the HTTP/2 server, any other to the HTTP/1.1 one.
 */
async function listenHttp1And2(handler: (req: Req, res: Res) => void): Promise<{ url: string; close(): Promise<void> }> {
  const http1 = createServer(handler);
  http1.keepAliveTimeout = 1000;
  const http2 = createH2Server();
  http2.on('request', handler);
  const sockets = new Set<Socket>();
  const tcp = createTcpServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.once('data', (first) => {
      socket.pause();
      socket.unshift(first);
      (first.subarray(0, 3).toString('latin1') === 'PRI' ? http2 : http1).emit('connection', socket);
      process.nextTick(() => socket.resume());
    });
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  const { port } = tcp.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      http1.closeAllConnections();
      http2.close();
      await new Promise<void>((resolve, reject) => tcp.close((error) => (error ? reject(error) : resolve())));
    },
  };
}
