import type { Context } from 'koa';

/** Every metered response says what it cost and what is left. */
export function setBillingHeaders(ctx: Context, billed: number, remaining: number): void {
  ctx.state.billed = billed;
  ctx.set('x-tollgate-billed-tokens', String(billed));
  ctx.set('x-tollgate-remaining-tokens', String(remaining));
}
