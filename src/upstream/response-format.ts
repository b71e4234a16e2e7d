// What a caller asked its answer to look like: chat completions' `response_format`, which the
// Responses (`text.format`) and Messages (`output_config.format`) dialects translate into.
export type Schema = Record<string, unknown>;

export type ResponseFormat =
  /** The answer is JSON valid against `schema`; `strict` asks for a guarantee (constrained decoding). */
  | { type: 'json_schema'; name: string; schema: Schema; strict: boolean }
  /** The answer is any JSON object. */
  | { type: 'json_object' };

const isObject = (value: unknown): value is Schema => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The structured output a canonical call's params ask for; undefined for text. */
export function responseFormatOf(params: Record<string, unknown>): ResponseFormat | undefined {
  const format = params.response_format;
  if (!isObject(format)) return undefined;
  if (format.type === 'json_object') return { type: 'json_object' };
  if (format.type !== 'json_schema' || !isObject(format.json_schema)) return undefined;
  const { name, schema, strict } = format.json_schema;
  return {
    type: 'json_schema',
    name: typeof name === 'string' && name !== '' ? name : 'response',
    // OpenAI takes a missing schema as "any JSON object".
    schema: isObject(schema) ? schema : { type: 'object' },
    strict: strict === true,
  };
}
