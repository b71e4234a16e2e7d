// Request bodies are checked against schemas/requests/*.json, compiled once at start-up.
import { readFileSync } from 'node:fs';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { createAjv } from '../ajv.ts';
import { badRequest } from './errors.ts';
import { SLICE_CHARS, isSliceablePattern, matchesNow, matchesSliced } from './sliced-pattern.ts';

const ajv = createAjv({ strict: false, allErrors: false });
const cache = new Map<string, ValidateFunction>();

/** Where a string is in the body: its parent object or array and its key there. */
interface Slot {
  parentData: Record<string | number, unknown>;
  parentDataProperty: string | number;
}

/** Long strings the schema passed whose `slicedPattern` is left to validateBody (one slice per turn). */
const deferred: { value: string; pattern: string; slot?: Slot }[] = [];

// `pattern` for fields that can hold megabytes (images inline): short strings are checked at once,
// as `pattern` would, longer ones after the rest of the body passes, in slices (sliced-pattern.ts).
// The schemas use it only where every anyOf above it is split by type, so a deferred string is in
// the branch that decides.
ajv.addKeyword({
  keyword: 'slicedPattern',
  type: 'string',
  schemaType: 'string',
  compile(pattern: string) {
    if (!isSliceablePattern(pattern)) throw new Error(`slicedPattern: no sliced check for ${pattern}`);
    const validate: ((value: string, slot?: Slot) => boolean) & { errors?: Partial<ErrorObject>[] } = (value, slot) => {
      if (value.length > SLICE_CHARS) deferred.push({ value, pattern, slot });
      else if (!matchesNow(pattern, value)) {
        // What ajv's `pattern` says (ajv adds where).
        validate.errors = [{ keyword: 'pattern', params: { pattern }, message: `must match pattern "${pattern}"` }];
        return false;
      }
      return true;
    };
    return validate;
  },
});

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

const refusal = (e: ErrorObject) => {
  const param = paramOf(e);
  return badRequest(describe(e, param), param);
};

/** The body checked against its schema; long strings under `slicedPattern` are checked after the rest, a slice per turn. */
export async function validateBody<T>(schemaName: string, body: unknown): Promise<T> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('The request body must be a JSON object.', null, 'invalid_json');
  assertNestingDepth(body);
  const v = compiled(schemaName);
  deferred.length = 0;
  const valid = v(body);
  const later = deferred.splice(0);
  if (!valid) throw refusal(v.errors![0]);
  for (const { value, pattern, slot } of later) {
    if (await matchesSliced(pattern, value)) continue;
    // The error the schema gives this body with the string failing its pattern at once (a space
    // fails every sliced pattern): an anyOf above it reports its own first error, as before.
    slot!.parentData[slot!.parentDataProperty] = ' ';
    const errors = v(body) ? null : v.errors;
    slot!.parentData[slot!.parentDataProperty] = value;
    throw refusal(errors?.[0] ?? { keyword: 'pattern', instancePath: '', schemaPath: '', params: { pattern }, message: `must match pattern "${pattern}"` });
  }
  return body as T;
}

export function warmValidators(names: string[]): void {
  for (const n of names) compiled(n);
}
