// POST /v1/images/generations and /v1/images/edits (JSON, or multipart as the openai SDK sends).
import { releaseReasonOf } from './metering.ts';
import { failedAttemptsOf, withFailover } from '../upstream/channels/failover.ts';
import type { ImageOutcome, ImageSize } from '../upstream/port.ts';
import { applyRateHeaders } from '../http/rate-limit.ts';
import { abortWhenClientGone } from '../http/client-gone.ts';
import { readFile } from 'node:fs/promises';
import type { Context } from 'koa';
import type { CallDeps } from './call-deps.ts';
import { validateBody } from '../http/validate.ts';
import { ApiError, badRequest } from '../http/errors.ts';
import { resolveCallerModel } from './model-access.ts';
import { resolveImageField, MAX_SOURCE_BYTES } from './image-source.ts';
import { setBillingHeaders } from '../http/billing-headers.ts';
import { assertSourceImage } from '../upstream/image-source.ts';
import { keyCallerOf } from '../http/state.ts';
import { inSpan } from '../tracing/spans.ts';
import { callTraceOf } from '../http/call-spans.ts';
import type { ImagesRequest } from './shapes/request-shapes.ts';

/** The body as its schema declares it (src/calls/shapes/request-shapes.ts). */
type ImageBody = ImagesRequest;

interface UploadedFile {
  filepath: string;
  mimetype?: string | null;
  size: number;
}

/** Multipart fields arrive as strings; n is a number in JSON. */
function fromMultipart(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) out[k] = Array.isArray(v) ? v[0] : v;
  if (typeof out.n === 'string' && /^\d+$/.test(out.n)) out.n = Number(out.n);
  return out;
}

async function uploadedSource(ctx: Context): Promise<{ bytes: Buffer; mime: string } | null> {
  const files = (ctx.request as unknown as { files?: Record<string, UploadedFile | UploadedFile[]> }).files ?? {};
  const names = Object.keys(files);
  const unknown = names.filter((n) => n !== 'image' && n !== 'image[]');
  if (unknown.length) throw badRequest(`Unsupported file field '${unknown[0]}': send the source image as 'image'.`, unknown[0]);
  const list = names.flatMap((n) => ([] as UploadedFile[]).concat(files[n]));
  if (list.length === 0) return null;
  if (list.length > 1) throw badRequest('Send exactly one source image.', 'image');
  if (list[0].size > MAX_SOURCE_BYTES) throw badRequest('The source image is too large.', 'image', 'image_too_large');
  return { bytes: await readFile(list[0].filepath), mime: list[0].mimetype ?? 'application/octet-stream' };
}

export function images(deps: CallDeps, mode: 'generations' | 'edits') {
  return async (ctx: Context) => {
    const multipart = ctx.is('multipart/form-data') !== false && ctx.is('multipart/form-data') !== null;
    if (multipart && mode === 'generations') throw badRequest('Send a JSON body to /images/generations.', null);
    // The multipart parser reads the body as it is; a body declared compressed was not understood.
    const encoding = ctx.get('content-encoding').trim().toLowerCase();
    if (multipart && encoding && encoding !== 'identity') {
      throw new ApiError(
        415,
        `Unsupported Content-Encoding '${encoding.slice(0, 40)}' for a multipart body: send it uncompressed.`,
        'invalid_request_error',
        'unsupported_media_type',
      );
    }
    const raw = multipart ? fromMultipart(ctx.request.body as Record<string, unknown>) : ctx.request.body;
    const body = await validateBody<ImageBody>('images', raw);
    const upload = multipart ? await uploadedSource(ctx) : null;
    if (upload && body.image) throw badRequest("Give the source image either as a file or as 'image', not both.", 'image');
    if (mode === 'edits' && !upload && !body.image) throw badRequest("Missing required parameter: 'image' (the source image to edit).", 'image');
    const caller = keyCallerOf(ctx);
    const model = await resolveCallerModel(deps, caller, body.model, deps.baseUrl(ctx));
    ctx.state.model = model.id;
    const source = upload ?? (body.image ? await resolveImageField(body.image) : undefined);
    // Bytes that are no decodable image are refused before any hold: a bad request never reaches the ledger.
    if (source) await assertSourceImage(source.bytes);
    const size: ImageSize = body.size ?? '1024x1024';
    const traceContext = callTraceOf(ctx);
    const hold = await inSpan('tollgate.hold', {}, traceContext, async (span) => {
      const h = await deps.metering.reserveImage(caller, model.id, model.multiplierMilli);
      span.setAttribute('tollgate.hold.tokens', h.amount);
      return h;
    });
    applyRateHeaders(ctx, hold.rate);
    // Aborted at once if the client already left while the call was prepared.
    const abort = abortWhenClientGone(ctx);
    let made: Awaited<ReturnType<typeof withFailover<ImageOutcome>>>;
    try {
      // Channels whose upstream makes no images are passed over.
      made = await withFailover(
        model.route.channels,
        { registry: deps.channels, signal: abort.signal, capable: (c) => c.provider.images !== false, operation: 'image_generation', trace: traceContext },
        (channel) => channel.provider.image({ upstreamModel: channel.upstreamModel, prompt: body.prompt, size, source, signal: abort.signal }),
      );
    } catch (err) {
      await deps.metering.release(hold, releaseReasonOf(err, abort.signal.aborted), failedAttemptsOf(err));
      throw err;
    }
    const { jpeg } = made.value;
    // Charged only once the image exists, and durably before the caller receives it.
    const billing = await inSpan('tollgate.charge', { 'tollgate.channel': made.channel.id }, traceContext, async (span) => {
      const b = await deps.metering.settleImage(
        hold,
        { size, edit: !!source },
        { channel: made.channel.id, upstreamModel: made.channel.upstreamModel, upstreamId: null, failovers: made.failed },
      );
      span.setAttribute('tollgate.billed_tokens', b.billed);
      return b;
    });
    setBillingHeaders(ctx, billing.billed, billing.remaining);
    // What the call cost: a top-level field, as OpenAI's `usage` of an image reply requires token
    // counts (input, output, text and image tokens) that a per-image price does not have.
    ctx.body = {
      created: Math.floor(Date.now() / 1000),
      data: [{ b64_json: jpeg.toString('base64') }],
      output_format: 'jpeg',
      size,
      billed_tokens: billing.billed,
    };
  };
}
