// A request's timeline of phases (src/tracing/call-phases.ts), for the breakdown of a call's wall
// time: started by the first middleware, marked by the steps of the route, and closed when the
// response has been handed to the socket. Installed only while phases are recorded.
import type { Context, Next } from 'koa';
import { NO_TIMELINE, startTimeline, type CallTimeline, type ChatCallPhase } from '../tracing/call-phases.ts';

export const timelineOf = (ctx: Context): CallTimeline => (ctx.state.timeline as CallTimeline | undefined) ?? NO_TIMELINE;

/** The first middleware: the request's timeline, its last two phases ('unwind': the middleware after the route; 'respond': writing the answer). */
export async function callTimeline(ctx: Context, next: Next): Promise<void> {
  const timeline = startTimeline();
  ctx.state.timeline = timeline;
  try {
    await next();
  } finally {
    timeline.mark('unwind');
    ctx.res.once('finish', () => timeline.mark('respond'));
  }
}

/** A middleware that ends the phase `phase` (the middleware before it in a route's chain). */
export const endsPhase =
  (phase: ChatCallPhase) =>
  (ctx: Context, next: Next): Promise<unknown> => {
    timelineOf(ctx).mark(phase);
    return next();
  };
