// The small parts the request and response shapes are built from, each writing the JSON Schema
// the way the request schemas always did (`enum`, a bare `const`, `type: [x, "null"]`, a `$ref`
// into `definitions`) while giving TypeScript the matching type.
import { Type, type SchemaOptions, type Static, type TProperties, type TSchema } from '@sinclair/typebox';

/** One file under schemas/requests/ or schemas/responses/: its title, its shape and what it refers to. */
export interface SchemaDocument {
  title: string;
  description?: string;
  shape: TSchema;
  definitions?: Record<string, TSchema>;
}

/** One of these values (`enum`); its type is their union. */
export const OneOf = <const V extends readonly string[]>(values: V, options: SchemaOptions = {}) => Type.Unsafe<V[number]>({ ...options, enum: [...values] });

/** Exactly this value (`const`, with no `type` beside it). */
export const Exactly = <const V extends string | number>(value: V) => Type.Unsafe<V>({ const: value });

/** The schema or null, written as one `type` list: `{"type": ["integer", "null"], ...}`. */
export function OrNull<T extends TSchema>(schema: T) {
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [schema.type, 'null'] });
}

/** Any JSON object, its properties unchecked: `{"type": "object"}`. */
export const AnyObject = Type.Unsafe<Record<string, unknown>>({ type: 'object' });

/** A `$ref` to the document's `definitions/<name>`, typed as that definition. */
export const Ref = <T extends TSchema>(name: string, _definition: T) => Type.Unsafe<Static<T>>({ $ref: `#/definitions/${name}` });

/**
 * A string that may be megabytes long (an image inline), checked against `pattern` one slice per
 * turn of the event loop: the project's `slicedPattern` keyword (src/http/validate.ts). Only the
 * patterns src/http/sliced-pattern.ts knows compile.
 */
export const SlicedString = (pattern: string, options: SchemaOptions = {}) => Type.String({ ...options, slicedPattern: pattern });

/** A JSON Schema condition on an object's `type` property: `{"properties": {"type": {"const": value}}}`. */
export const TypeIs = (value: string, required = false) => ({
  ...(required ? { required: ['type'] } : {}),
  properties: { type: { const: value } },
});

/** An object with exactly these properties: a reply that is Tollgate's own through and through. */
export const Closed = <P extends TProperties>(properties: P, options: SchemaOptions = {}) =>
  Type.Object(properties, { ...options, additionalProperties: false });

/** A string other than these: the branch of a union for kinds of items the gateway passes on unread. */
export const OtherThan = (values: readonly string[]) => Type.String({ not: { enum: [...values] } });

/** A model id or alias as callers send it. */
export const ModelName = Type.String({ minLength: 1, maxLength: 200 });
/** The caller's end-user id (OpenAI's `user`). */
export const EndUser = Type.String({ maxLength: 256 });
/** A token count callers cap output with. */
export const TokenCap = Type.Integer({ minimum: 1, maximum: 1000000 });
export const Temperature = Type.Number({ minimum: 0, maximum: 2 });
export const TopP = Type.Number({ minimum: 0, maximum: 1 });
/** A name OpenAI accepts for a JSON schema of structured output. */
export const SchemaName = Type.String({ pattern: '^[a-zA-Z0-9_-]{1,64}$' });
/** The output formats of chat completions (`response_format`) and Responses (`text.format`). */
export const OUTPUT_FORMATS = ['text', 'json_object', 'json_schema'] as const;
