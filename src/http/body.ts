// Request bodies, read only once the caller is known and bounded before any work is done on them.
// The body is decompressed as it arrives and counted against the route's size limit, and its
// shape (nesting depth, items per array, keys per object, values in all) is checked on the raw
// bytes chunk by chunk: a 23 KB gzip of millions of empty objects is refused after its first
// limit is crossed, before it is inflated further or handed to JSON.parse. Multipart (image
// edits) is formidable's, with its own limits on files and fields.
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { Readable } from 'node:stream';
import type { Context, Middleware, Next } from 'koa';
import { koaBody } from 'koa-body';
import { ApiError, badRequest } from './errors.ts';
import { trackUpload } from './uploads.ts';
import { MAX_BODY_DEPTH } from './validate.ts';
import { InvalidJson, NOTED_STRING_BYTES, StringSpans } from './json-long-strings.ts';
import { type BodyMap, ContainerSpans, NOTED_CONTAINER_BYTES, parseInTurns } from './json-in-turns.ts';
import { nextTurn } from '../next-turn.ts';

export interface BodyLimits {
  /** Bytes after decompression. */
  bytes: number;
  depth: number;
  arrayItems: number;
  objectKeys: number;
  /** Values of any kind in the whole document. */
  values: number;
}

const MB = 1024 * 1024;

/** The model-call body size by default (TOLLGATE_MAX_REQUEST_MB): see modelCallLimits. */
export const DEFAULT_MODEL_CALL_MB = 10;

/**
 * Model calls: long conversations with images inline, yet far fewer values than a pathological
 * body: the schemas' 10,000 messages (about 30,000 values) and hundreds of tools with their
 * schemas fit; 100,000 values parse and validate in about 10 ms (bench/worst-request.ts).
 *
 * The size is as large as the service needs and no larger: a prompt fills the largest context
 * window (1M tokens, about 4 MB of text) and the spec's images are JPEGs of 500-800 KB (about
 * 1 MB as base64), so 10 MB holds the longest prompt with several images. Each MB allowed costs
 * about 3 MB of memory while it is parsed (the bytes, the text and the parsed copy of its
 * strings) and about 1 ms of event loop per step (decode, JSON.parse, validation): 10 MB keeps
 * the worst request under 50 MB and 50 ms, 25 MB did not (RELIABILITY.md "Security").
 */
export const modelCallLimits = (megabytes = DEFAULT_MODEL_CALL_MB): BodyLimits => ({
  bytes: Math.round(megabytes * MB),
  depth: MAX_BODY_DEPTH,
  arrayItems: 10_000,
  objectKeys: 1_000,
  values: 100_000,
});
/** The admin API, redemptions and checkout: plans, keys, grants, codes and webhooks are small objects. */
export const ADMIN_LIMITS: BodyLimits = { bytes: 1 * MB, depth: 16, arrayItems: 1_000, objectKeys: 200, values: 20_000 };

const DECODERS: Record<string, () => NodeJS.ReadWriteStream> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/**
 * Longer than any real body has, and each would be one piece of the parse (json-in-turns.ts):
 * JSON.parse of a 10 MB number takes 33 ms, of 10 MB of blanks 17 ms.
 */
const MAX_LITERAL_CHARS = 1_000;
const MAX_BLANKS = 65_536;
/** Keys are parsed whole, never cut out of the text (see ShapeCheck.stringEnded). */
const MAX_KEY_BYTES = 65_536;

const tooLarge = (what: string) => new ApiError(413, `The request body is too large: ${what}.`, 'invalid_request_error', 'request_too_large');

/**
 * The body's shape, checked byte by byte as chunks arrive (strings skipped whole with indexOf).
 * It notes where each string but the shortest lies, and each large container with its items'
 * boundaries, for the parse in pieces (json-in-turns.ts).
 */
export class ShapeCheck implements BodyMap {
  readonly strings = new StringSpans();
  readonly containers = new ContainerSpans();
  /** Bytes fed before the current chunk, and where the string being read began. */
  private fed = 0;
  private stringStart = 0;
  /** Whether the string being read is an object's key: keys are never cut out (see stringEnded). */
  private stringIsKey = false;
  /**
   * Per open container: values seen so far (commas + 1 once anything is in it), whether it is an
   * object, where it began and where its commas are (null until the first).
   */
  private readonly open: { items: number; object: boolean; empty: boolean; start: number; commas: number[] | null }[] = [];
  private values = 0;
  private inString = false;
  private escaped = false;
  /** Characters of the number or literal being read, and blanks in a row: neither is ever long in a real body. */
  private literal = 0;
  private blanks = 0;

  /** `noted`: the shortest string and container noted; smaller in tests, so small bodies are cut too. */
  constructor(
    private readonly limits: BodyLimits,
    private readonly noted = { stringBytes: NOTED_STRING_BYTES, containerBytes: NOTED_CONTAINER_BYTES },
  ) {}

  feed(chunk: Buffer): void {
    const n = chunk.length;
    // The next backslash at or after i (n: none): kept, so thousands of short strings without one do not each search the chunk to its end.
    let slash = -1;
    for (let i = 0; i < n; i++) {
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          continue;
        }
        // Jump to the next quote or backslash: long strings (base64 images) cost almost nothing.
        const q = chunk.indexOf(0x22, i);
        if (slash < i) {
          const found = chunk.indexOf(0x5c, i);
          slash = found === -1 ? n : found;
        }
        const b = slash === n ? -1 : slash;
        const next = q === -1 ? b : b === -1 ? q : Math.min(q, b);
        if (next === -1) break;
        i = next;
        if (chunk[i] === 0x5c) this.escaped = true;
        else this.stringEnded(this.fed + i + 1);
        continue;
      }
      const c = chunk[i];
      if (c <= 0x20) {
        this.literal = 0;
        if (++this.blanks > MAX_BLANKS) throw badRequest(`The request body has more than ${MAX_BLANKS} blank characters in a row.`, null, 'invalid_json');
        continue;
      }
      this.blanks = 0;
      if (c === 0x22) {
        this.literal = 0;
        this.inString = true;
        this.stringStart = this.fed + i;
        const top = this.open.at(-1);
        this.stringIsKey = top !== undefined && top.object && top.empty;
        this.value();
      } else if (c === 0x7b || c === 0x5b) {
        this.literal = 0;
        this.value();
        if (this.open.length >= this.limits.depth)
          throw badRequest(`The request body is nested too deeply (more than ${this.limits.depth} levels).`, null, 'invalid_json');
        this.open.push({ items: 0, object: c === 0x7b, empty: true, start: this.fed + i, commas: null });
      } else if (c === 0x7d || c === 0x5d) {
        this.literal = 0;
        const closed = this.open.pop();
        // A comma with no item after it (`[1,]`) is never JSON either: so no container the parse cuts into runs has an empty item.
        if (closed?.empty && closed.commas) throw badRequest('The request body is not valid JSON.', null, 'invalid_json');
        const end = this.fed + i + 1;
        if (closed?.commas && end - closed.start >= this.noted.containerBytes) this.containers.add(closed.start, end, closed.object, closed.commas);
      } else if (c === 0x2c || c === 0x3a) {
        this.literal = 0;
        const top = c === 0x2c ? this.open.at(-1) : undefined;
        if (top) {
          // A comma with no item before it (`[,` or `,,`) is never JSON: refused now, before millions of them are noted.
          if (top.empty) throw badRequest('The request body is not valid JSON.', null, 'invalid_json');
          top.empty = true; // the next value starts a new item
          (top.commas ??= []).push(this.fed + i);
        }
      } else {
        // A number, true, false or null: counted once, at its first character.
        if (++this.literal === 1) this.value();
        if (this.literal > MAX_LITERAL_CHARS)
          throw badRequest(`A number or literal in the request body is longer than ${MAX_LITERAL_CHARS} characters.`, null, 'invalid_json');
      }
    }
    this.fed += n;
  }

  private stringEnded(end: number): void {
    this.inString = false;
    const length = end - this.stringStart;
    // A key stays in the text JSON.parse sees: a repeated key, one copy written with escapes, must
    // meet its copies in one parse to keep JSON.parse's first place and last value. So keys are
    // bounded instead, far above any real one.
    if (this.stringIsKey) {
      if (length > MAX_KEY_BYTES) throw badRequest(`A key in the request body is longer than ${MAX_KEY_BYTES} bytes.`, null, 'invalid_json');
    } else if (length >= this.noted.stringBytes) this.strings.add(this.stringStart, end);
  }

  /** A value (or an object key, which is a string too) begins. */
  private value(): void {
    if (++this.values > this.limits.values) throw badRequest(`The request body holds more than ${this.limits.values} values.`, null, 'invalid_json');
    const top = this.open.at(-1);
    if (!top || !top.empty) return;
    top.empty = false;
    top.items++;
    if (top.object && top.items > this.limits.objectKeys)
      throw badRequest(`An object in the request body has more than ${this.limits.objectKeys} keys.`, null, 'invalid_json');
    if (!top.object && top.items > this.limits.arrayItems)
      throw badRequest(`An array in the request body has more than ${this.limits.arrayItems} items.`, null, 'invalid_json');
  }
}

/** The decompressed body's bytes and where its strings lie, refused at the first limit it crosses. */
async function readBytes(ctx: Context, limits: BodyLimits): Promise<{ body: Buffer; size: number; map: BodyMap }> {
  const encoding = ctx.get('content-encoding').trim().toLowerCase() || 'identity';
  const declared = Number(ctx.get('content-length') || 0);
  // Compressed bytes never outnumber what they inflate to by much; a declared size over the limit is refused unread.
  if (declared > limits.bytes) throw tooLarge(`at most ${limits.bytes / MB} MB`);
  const decoder = encoding === 'identity' ? null : DECODERS[encoding];
  if (decoder === undefined)
    throw new ApiError(415, `Unsupported Content-Encoding '${encoding.slice(0, 40)}'.`, 'invalid_request_error', 'unsupported_media_type');
  const source: Readable = decoder ? (ctx.req.pipe(decoder()) as unknown as Readable) : ctx.req;
  const shape = new ShapeCheck(limits);
  // One buffer, filled as chunks arrive: no copy of the whole body in one go.
  let body: Buffer = Buffer.allocUnsafe(Math.min(declared || 64 * 1024, limits.bytes));
  let size = 0;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      if (size + chunk.length > limits.bytes) throw tooLarge(`at most ${limits.bytes / MB} MB${decoder ? ' once decompressed' : ''}`);
      shape.feed(chunk);
      if (size + chunk.length > body.length) body = grown(body, size, size + chunk.length, limits.bytes);
      chunk.copy(body, size);
      size += chunk.length;
    }
  } catch (err) {
    // Stop reading: the rest of the body is not wanted, and the connection is not reused.
    ctx.req.unpipe();
    ctx.set('connection', 'close');
    throw err;
  }
  return { body, size, map: shape };
}

/**
 * Bodies from this size on give other requests a turn before and after they are parsed; a smaller
 * one parses in well under a millisecond, and two turns of the loop cost a lone call more than that
 * (0.13 ms for a chat body in bench/c1-breakdown.ts's "body" phase).
 */
const TURNS_FROM_BYTES = 64 * 1024;

/** The body parsed, once within its limits; a large one in turns, so other requests run in between. */
async function readJson(ctx: Context, limits: BodyLimits): Promise<unknown> {
  const { body, size, map } = await readBytes(ctx, limits);
  if (isBlank(body, size)) return {};
  const large = size >= TURNS_FROM_BYTES;
  if (large) await nextTurn();
  let parsed: unknown;
  try {
    parsed = await parseInTurns(body, size, map);
  } catch (err) {
    if (err instanceof InvalidJson) throw badRequest(err.message, null, 'invalid_json');
    throw err;
  }
  // Like the JSON parser before it: a bare string or number is not a request.
  if (parsed === null || typeof parsed !== 'object') throw badRequest('The request body is not valid JSON.', null, 'invalid_json');
  if (large) await nextTurn();
  return parsed;
}

/** Only JSON's blanks (space, tab, CR, LF): an empty body is read as {}. */
function isBlank(body: Buffer, size: number): boolean {
  for (let i = 0; i < size; i++) if (body[i] !== 0x20 && body[i] !== 0x09 && body[i] !== 0x0a && body[i] !== 0x0d) return false;
  return true;
}

/** `body` with room for `needed` bytes (doubling, at most `max`), its first `used` bytes kept. */
function grown(body: Buffer, used: number, needed: number, max: number): Buffer {
  const next = Buffer.allocUnsafe(Math.min(max, Math.max(needed, body.length * 2)));
  body.copy(next, 0, 0, used);
  return next;
}

const PARSED_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/** Reads a JSON body within `limits` into ctx.request.body; mount it after authentication. */
export function jsonBody(limits: BodyLimits): Middleware {
  return async (ctx: Context, next: Next) => {
    if (PARSED_METHODS.has(ctx.method) && ctx.is('application/json')) ctx.request.body = (await readJson(ctx, limits)) as typeof ctx.request.body;
    else if (ctx.request.body === undefined) ctx.request.body = {};
    await next();
  };
}

/** JSON as jsonBody, multipart/form-data by formidable (image edits), with its limits on files and fields. */
export function jsonOrMultipartBody(limits: BodyLimits): Middleware {
  const json = jsonBody(limits);
  const multipart = koaBody({
    json: false,
    multipart: true,
    urlencoded: false,
    text: false,
    formidable: { maxFileSize: limits.bytes, maxTotalFileSize: limits.bytes, maxFiles: 4, maxFields: 50, maxFieldsSize: 1 * MB, onFileBegin: trackUpload },
  });
  return (ctx, next) => (ctx.is('multipart/form-data') ? multipart(ctx, next) : json(ctx, next));
}

/**
 * Outside `reading` (the /v1 and admin API paths, whose routes read bodies after authentication)
 * no route takes a body: /, /healthz, /readyz, /metrics and the static pages refuse one unread.
 * A POST, PUT or PATCH there has no route (a 404 or 405 follows) and its body is not read either.
 */
export function refuseBodyOutside(reading: RegExp): Middleware {
  return (ctx, next) => {
    if (reading.test(ctx.path) || PARSED_METHODS.has(ctx.method)) return next();
    const declared = ctx.get('content-length');
    if ((declared && declared !== '0') || ctx.get('transfer-encoding')) {
      ctx.set('connection', 'close');
      throw new ApiError(413, `${ctx.method} ${ctx.path.slice(0, 200)} takes no request body.`, 'invalid_request_error', 'request_too_large');
    }
    return next();
  };
}
