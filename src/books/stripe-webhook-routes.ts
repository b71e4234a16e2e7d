// POST /webhooks/stripe: Stripe's notifications. Self-contained: it reads the raw body itself
// (the signature covers the exact bytes, so no parser may touch them first), bounded in size,
// verifies it with the library's own check, keeps the notice raw (once per Stripe event id), and
// only then runs its handler (src/payments/stripe-events/), so a handler fixed later can be run
// again over it. A bad or missing signature or a malformed body is a 400 and writes nothing; a
// failure while keeping or handling is a 5xx, so Stripe delivers the event again (each is
// idempotent by Stripe's own ids).
import type { Context, Next } from 'koa';
import { ApiError, badRequest } from '../http/errors.ts';
import type { StripeGateway } from './stripe.ts';
import type { Logger } from 'pino';

export const STRIPE_WEBHOOK_PATH = '/webhooks/stripe';
/** Stripe's event payloads are a few KB; anything far larger is not one. */
const MAX_BODY_BYTES = 512 * 1024;

async function rawBody(ctx: Context): Promise<Buffer> {
  const declared = Number(ctx.get('content-length') || 0);
  if (declared > MAX_BODY_BYTES) throw badRequest(`The body is larger than ${MAX_BODY_BYTES} bytes: not a Stripe event.`, null, 'request_too_large');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw badRequest(`The body is larger than ${MAX_BODY_BYTES} bytes: not a Stripe event.`, null, 'request_too_large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isEvent = (v: unknown): boolean => isObject(v) && typeof v.id === 'string' && typeof v.type === 'string' && isObject(v.data) && isObject(v.data.object);

export function stripeWebhookRoute(stripe: StripeGateway | null, log: Logger) {
  return async (ctx: Context, next: Next) => {
    if (ctx.path !== STRIPE_WEBHOOK_PATH) return next();
    if (ctx.method !== 'POST') throw new ApiError(405, 'Use POST.', 'invalid_request_error', 'method_not_allowed');
    if (!stripe)
      throw new ApiError(
        404,
        'Stripe payments are off on this gateway (STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET are not set).',
        'invalid_request_error',
        'stripe_off',
      );
    const signature = ctx.get('stripe-signature');
    if (!signature) throw badRequest('The Stripe-Signature header is missing.', 'stripe-signature', 'invalid_signature');
    const raw = await rawBody(ctx);
    let event;
    try {
      event = stripe.verify(raw, signature);
    } catch {
      // The library's message may quote the header; the answer says only what failed.
      throw badRequest('The Stripe signature does not match the body (or the body is not a Stripe event).', 'stripe-signature', 'invalid_signature');
    }
    // Signed but not shaped like an event (Stripe never sends one): refused before anything reads it.
    if (!isEvent(event)) throw badRequest('The body is not a Stripe event: an object with an id, a type and data.object.', null, 'invalid_event');
    await stripe.keep(event, raw);
    const outcome = await stripe.handle(event);
    log.info({ stripeEvent: event.id, type: event.type, outcome }, 'stripe event handled');
    ctx.body = { received: true, outcome };
  };
}
