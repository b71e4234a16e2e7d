// What every admin route reads from its input the same way: a JSON object body, a bounded
// string, a time the database and the events can hold.
import type { Context } from 'koa';
import { badRequest } from './errors.ts';

export type Body = Record<string, unknown>;

export const body = (ctx: Context): Body => {
  const b = ctx.request.body;
  if (!b || typeof b !== 'object' || Array.isArray(b)) throw badRequest('The request body must be a JSON object.');
  return b as Body;
};

export function str(b: Body, name: string, opts: { optional?: boolean; max?: number } = {}): string {
  const v = b[name];
  if (v === undefined && opts.optional) return '';
  if (typeof v !== 'string' || v.length === 0 || v.length > (opts.max ?? 200))
    throw badRequest(`'${name}' must be a non-empty string of at most ${opts.max ?? 200} characters.`, name);
  return v;
}

// Times the database and the events can hold: a JavaScript date may lie far outside them.
const EARLIEST = Date.UTC(1970, 0, 1);
const LATEST = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

export function parseTime(v: unknown, name: string): Date {
  const d = typeof v === 'string' ? new Date(v) : new Date(NaN);
  if (Number.isNaN(d.getTime())) throw badRequest(`'${name}' must be an ISO 8601 time.`, name);
  if (d.getTime() < EARLIEST || d.getTime() > LATEST) throw badRequest(`'${name}' must be between 1970 and 9999.`, name);
  return d;
}

/** A model id or alias as the ModelPriced event holds it. */
export const MAX_MODEL_ID = 100;
