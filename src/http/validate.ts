// Request bodies are checked against schemas/requests/*.json, compiled once at start-up.
import { readFileSync } from 'node:fs';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { createAjv } from '../ajv.ts';
import { badRequest } from './errors.ts';

const ajv = createAjv({ strict: false, allErrors: false });
const cache = new Map<string, ValidateFunction>();

function compiled(name: string): ValidateFunction {
  let v = cache.get(name);
  if (!v) {
    v = ajv.compile(JSON.parse(readFileSync(new URL(`../../schemas/requests/${name}.json`, import.meta.url), 'utf8')));
    cache.set(name, v);
  }
  return v;
}

/** Names the offending field the way OpenAI does: messages[0].role */
export function paramOf(e: ErrorObject): string {
  const path = e.instancePath
    .split('/')
    .slice(1)
    .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p}`))
    .join('')
    .replace(/^\./, '');
  if (e.keyword === 'required')
    return path ? `${path}.${(e.params as { missingProperty: string }).missingProperty}` : (e.params as { missingProperty: string }).missingProperty;
  return path || '(body)';
}

function describe(e: ErrorObject, param: string): string {
  if (e.keyword === 'required') return `Missing required parameter: '${param}'.`;
  if (e.keyword === 'enum')
    return `Invalid value for '${param}': expected one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}.`;
  if (e.keyword === 'const') return `Invalid value for '${param}': only ${JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)} is supported.`;
  if (e.keyword === 'maxLength' && param === 'prompt') return `'prompt' is too long: at most ${(e.params as { limit: number }).limit} characters.`;
  return `Invalid value for '${param}': ${e.message}.`;
}

/** Deeper than any real request (tool schemas included), shallow enough for recursive code downstream. */
export const MAX_BODY_DEPTH = 64;

/**
 * Refuses JSON nested deeper than `max` levels. Walked without recursion, so a hostile body of
 * 100,000 levels cannot overflow the stack here; code after this check (hashing, tokenizing,
 * JSON.stringify for the upstream) may then recurse safely.
 */
export function assertNestingDepth(value: unknown, max = MAX_BODY_DEPTH): void {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) throw badRequest(`The request body is nested too deeply (more than ${max} levels).`, null, 'invalid_json');
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
}

export function validateBody<T>(schemaName: string, body: unknown): T {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('The request body must be a JSON object.', null, 'invalid_json');
  assertNestingDepth(body);
  const v = compiled(schemaName);
  if (!v(body)) {
    const e = v.errors![0];
    const param = paramOf(e);
    throw badRequest(describe(e, param), param);
  }
  return body as T;
}

export function warmValidators(names: string[]): void {
  for (const n of names) compiled(n);
}
