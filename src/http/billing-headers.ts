import type { Context } from 'koa';

/** Every metered response that is not streamed says what it cost and what is left. */
export function setBillingHeaders(ctx: Context, billed: number, remaining: number): void {
  ctx.state.billed = billed;
  ctx.set('x-tollgate-billed-tokens', String(billed));
  setRemainingHeader(ctx, remaining);
}

/**
 * A streamed reply's headers leave before anything is charged: they say only what was left when
 * the stream began. What the call cost is in the stream itself (its final usage), never a header.
 */
export function setRemainingHeader(ctx: Context, remaining: number): void {
  ctx.set('x-tollgate-remaining-tokens', String(remaining));
}
