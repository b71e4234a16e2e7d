/**
 * Validate values against schemas from OpenAI's published OpenAPI 3.1 document.
 *
 * The document lives outside the repo, at `../shared/reference/openai-openapi.json`
 * next to the clone. It is loaded and normalised once, registered with Ajv
 * (JSON Schema 2020-12 build, non-strict) under a fixed `$id`, and each
 * `components.schemas.<name>` is compiled lazily on first use and cached.
 *
 * Normalisation needed to make the document usable by Ajv 2020:
 *  - `nullable: true` (OpenAPI 3.0 style, still used in this 3.1 document) is
 *    rewritten to real JSON Schema: `null` is added to `type` (and to `enum`
 *    when present), or the node is wrapped in `anyOf: [node, {type: 'null'}]`
 *    when it has no plain `type` (`$ref`/`anyOf`/`oneOf`/...). `nullable: false`
 *    is dropped. Ajv's own `nullable` support cannot be used because it throws
 *    on `nullable` without `type` and does not extend `enum`.
 *  - `$recursiveRef` / `$recursiveAnchor` (draft 2019-09, unknown to Ajv 2020)
 *    are turned into a plain `$ref` to the enclosing component schema.
 *  - Boolean `exclusiveMinimum`/`exclusiveMaximum` (OpenAPI 3.0) become numeric.
 *  - `discriminator`, `x-*`, `example` and other vendor keywords are ignored
 *    (non-strict mode); validation relies on `oneOf`/`anyOf` alone.
 *  - Formats: ajv-formats plus `unixtime`; any other format found in the
 *    document that Ajv does not know is registered as always-valid.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Ajv2020Module from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';

// ajv / ajv-formats are CJS with `exports.default`; normalise for ESM + tsx.
type Ajv2020Ctor = typeof import('ajv/dist/2020.js').default;
const Ajv2020: Ajv2020Ctor = (Ajv2020Module as unknown as { default?: Ajv2020Ctor }).default ?? (Ajv2020Module as unknown as Ajv2020Ctor);
type AddFormats = typeof import('ajv-formats').default;
const addFormats: AddFormats = (addFormatsModule as unknown as { default?: AddFormats }).default ?? (addFormatsModule as unknown as AddFormats);

export const OPENAPI_URL = new URL('../../../shared/reference/openai-openapi.json', import.meta.url);
export const OPENAPI_PATH = fileURLToPath(OPENAPI_URL);
const DOC_ID = 'https://tollgate.test/openai-openapi.json';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

export interface ValidationResult {
  ok: boolean;
  errors: string;
}

let ajv: InstanceType<Ajv2020Ctor> | undefined;
let schemaNames: Set<string> | undefined;
const cache = new Map<string, ValidateFunction>();

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Keywords whose value is a single subschema. */
const SUB_ONE = [
  'additionalProperties',
  'items',
  'additionalItems',
  'not',
  'if',
  'then',
  'else',
  'contains',
  'propertyNames',
  'unevaluatedProperties',
  'unevaluatedItems',
  'contentSchema',
];
/** Keywords whose value is an array of subschemas. */
const SUB_ARRAY = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
/** Keywords whose value is a map name -> subschema. */
const SUB_MAP = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];

const APPLICATORS = ['$ref', 'allOf', 'anyOf', 'oneOf', 'not', 'if', 'const'];

/** Rewrite one schema node (and its subschemas) in place-free fashion; returns the new node. */
function normalise(node: Json, componentRef: string): Json {
  if (!isObject(node)) return node;
  const out: JsonObject = { ...node };

  for (const k of SUB_ONE) if (k in out) out[k] = normalise(out[k]!, componentRef);
  for (const k of SUB_ARRAY) {
    const v = out[k];
    if (Array.isArray(v)) out[k] = v.map((s) => normalise(s, componentRef));
  }
  for (const k of SUB_MAP) {
    const v = out[k];
    if (isObject(v)) out[k] = Object.fromEntries(Object.entries(v).map(([n, s]) => [n, normalise(s, componentRef)]));
  }

  if ('$recursiveRef' in out) {
    delete out.$recursiveRef;
    out.$ref = componentRef;
  }
  delete out.$recursiveAnchor;
  // Ajv only understands `discriminator` with its own option and strict rules; plain oneOf/anyOf suffices.
  delete out.discriminator;

  // OpenAPI 3.0 boolean form: `minimum: n, exclusiveMinimum: true` -> 2020-12 `exclusiveMinimum: n`.
  for (const [excl, incl] of [
    ['exclusiveMinimum', 'minimum'],
    ['exclusiveMaximum', 'maximum'],
  ] as const) {
    if (typeof out[excl] !== 'boolean') continue;
    if (out[excl] === true && typeof out[incl] === 'number') {
      out[excl] = out[incl];
      delete out[incl];
    } else {
      delete out[excl];
    }
  }

  const nullable = out.nullable;
  delete out.nullable;
  if (nullable !== true) return out;

  const type = out.type;
  const hasPlainType = typeof type === 'string' || Array.isArray(type);
  if (hasPlainType && !APPLICATORS.some((k) => k in out)) {
    const types = Array.isArray(type) ? [...type] : [type as string];
    if (!types.includes('null')) types.push('null');
    out.type = types;
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    return out;
  }
  return { anyOf: [out, { type: 'null' }] };
}

function collectFormats(node: Json, into: Set<string>): void {
  if (Array.isArray(node)) {
    for (const n of node) collectFormats(n, into);
  } else if (isObject(node)) {
    if (typeof node.format === 'string') into.add(node.format);
    for (const [k, v] of Object.entries(node)) if (k !== 'example' && k !== 'default') collectFormats(v, into);
  }
}

function init(): InstanceType<Ajv2020Ctor> {
  if (ajv) return ajv;
  const doc = JSON.parse(readFileSync(OPENAPI_URL, 'utf8')) as JsonObject;
  const components = doc.components;
  if (!isObject(components) || !isObject(components.schemas)) {
    throw new Error(`${OPENAPI_PATH}: no components.schemas`);
  }
  const schemas: JsonObject = {};
  for (const [name, schema] of Object.entries(components.schemas)) {
    schemas[name] = normalise(schema, `#/components/schemas/${escapePointer(name)}`);
  }

  const instance = new Ajv2020({
    strict: false,
    allErrors: true,
    validateFormats: true,
    // The document is not guaranteed to pass the 2020-12 meta-schema (vendor keywords, examples).
    validateSchema: false,
    logger: false,
  });
  addFormats(instance);
  instance.addFormat('unixtime', { type: 'number', validate: (n: number) => Number.isFinite(n) });
  const formats = new Set<string>();
  collectFormats(schemas, formats);
  for (const f of formats) if (!instance.formats[f]) instance.addFormat(f, true);

  instance.addSchema({ $id: DOC_ID, components: { schemas } } as object);
  schemaNames = new Set(Object.keys(schemas));
  ajv = instance;
  return instance;
}

function escapePointer(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** The compiled validator of a schema (compiled on first use, then the same function). */
export function validatorFor(schemaName: string): ValidateFunction {
  const cached = cache.get(schemaName);
  if (cached) return cached;
  const instance = init();
  if (!schemaNames!.has(schemaName)) {
    throw new Error(`Unknown OpenAPI schema "${schemaName}" (not under components.schemas in ${OPENAPI_PATH})`);
  }
  const validate = instance.compile({ $ref: `${DOC_ID}#/components/schemas/${escapePointer(schemaName)}` });
  cache.set(schemaName, validate);
  return validate;
}

const MAX_ERROR_LINES = 40;

function formatErrors(errors: ErrorObject[] | null | undefined): string {
  if (!errors || errors.length === 0) return '';
  const lines: string[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    const where = e.instancePath === '' ? '(root)' : e.instancePath;
    let detail = '';
    const p = e.params as Record<string, unknown>;
    if (e.keyword === 'enum') detail = ` ${JSON.stringify(p.allowedValues)}`;
    else if (e.keyword === 'const') detail = ` ${JSON.stringify(p.allowedValue)}`;
    else if (e.keyword === 'additionalProperties') detail = ` (${String(p.additionalProperty)})`;
    const line = `${where} ${e.message ?? e.keyword}${detail}  [schema ${e.schemaPath}]`;
    if (seen.has(line)) continue;
    seen.add(line);
    lines.push(line);
  }
  const shown = lines.slice(0, MAX_ERROR_LINES);
  if (lines.length > shown.length) shown.push(`... and ${lines.length - shown.length} more`);
  return shown.join('\n');
}

/** Validate `value` against `components.schemas[schemaName]` of the OpenAI OpenAPI document. */
export function validateAgainst(schemaName: string, value: unknown): ValidationResult {
  const validate = validatorFor(schemaName);
  const ok = validate(value) as boolean;
  return { ok, errors: ok ? '' : formatErrors(validate.errors) };
}

/** Throw an Error with readable Ajv errors unless `value` matches `components.schemas[schemaName]`. */
export function assertMatches(schemaName: string, value: unknown): void {
  const { ok, errors } = validateAgainst(schemaName, value);
  if (!ok) {
    let shown: string;
    try {
      shown = JSON.stringify(value, null, 2);
    } catch {
      shown = String(value);
    }
    if (shown.length > 2000) shown = `${shown.slice(0, 2000)}...`;
    throw new Error(`Value does not match OpenAPI schema ${schemaName}:\n${errors}\nValue: ${shown}`);
  }
}

/** Names under components.schemas (useful for diagnostics). */
export function openapiSchemaNames(): string[] {
  init();
  return [...schemaNames!];
}
