// A caller's response_format in Anthropic's terms. Models that have structured outputs get
// `output_config.format` (constrained decoding; generally available, no beta header); the others,
// and any request that is not strict, get a forced tool whose input schema is the caller's: its
// input is the answer, handed back as the message's JSON text.
import type { ChatCall } from '../port.ts';
import { responseFormatOf, type Schema } from '../response-format.ts';
import type { Json } from './json.ts';

/**
 * Upstream models with native structured outputs, as Anthropic lists them (Opus 4.5 to 4.8,
 * Sonnet 4.5 and 4.6, Haiku 4.5). A provider's `structuredOutputModels` replaces this list.
 */
export const DEFAULT_STRUCTURED_OUTPUT_MODELS: readonly string[] = [
  'claude-opus-4-5',
  'claude-opus-4-6',
  'claude-opus-4-7',
  'claude-opus-4-8',
  'claude-sonnet-4-5',
  'claude-sonnet-4-6',
  'claude-haiku-4-5',
];

/** Whether `model` is on the list, itself or as a dated snapshot of it (claude-sonnet-4-5-20250929, or Vertex AI's claude-sonnet-4-5@20250929). */
export function hasStructuredOutput(model: string, models: readonly string[]): boolean {
  return models.some(
    (listed) => model === listed || (/^[-@]$/.test(model.charAt(listed.length)) && model.startsWith(listed) && /^\d{8}$/.test(model.slice(listed.length + 1))),
  );
}

/** The tool that carries the answer; `wrapped` when its input is {value} around a schema whose root is no object. */
export interface AnswerTool {
  name: string;
  wrapped: boolean;
}

export interface StructuredRequest {
  /** Goes into the body as output_config (native structured output). */
  outputConfig?: Json;
  /** Added to the body's tools and forced (the fallback). */
  answerTool?: AnswerTool & { definition: Json };
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** How the call's response_format goes to Anthropic, or undefined when it asks for text. */
export function structuredRequest(call: ChatCall, nativeModels: readonly string[]): StructuredRequest | undefined {
  const format = responseFormatOf(call.params);
  if (!format) return undefined;
  // Constrained decoding takes a subset of JSON Schema (every object closed, ...); a strict
  // OpenAI schema is written to much the same rules, a non-strict one may not be.
  if (format.type === 'json_schema' && format.strict && hasStructuredOutput(call.upstreamModel, nativeModels)) {
    return { outputConfig: { format: { type: 'json_schema', schema: format.schema } } };
  }
  const taken = new Set((call.tools ?? []).map((tool) => tool.function.name));
  let name = format.type === 'json_schema' && TOOL_NAME.test(format.name) ? format.name : 'json_answer';
  while (taken.has(name)) name = `${name}_answer`.slice(-64);
  const schema: Schema = format.type === 'json_schema' ? format.schema : { type: 'object' };
  // A tool's input is always an object: another root is carried as {value}.
  const wrapped = !(schema.type === 'object' || (schema.type === undefined && typeof schema.properties === 'object'));
  const input_schema = wrapped ? { type: 'object', properties: { value: schema }, required: ['value'] } : schema;
  return {
    answerTool: {
      name,
      wrapped,
      definition: { name, description: 'Give your final answer as the input of this tool.', input_schema },
    },
  };
}

/** The answer a tool input carries, as the JSON text of the message. */
export function answerText(input: unknown, tool: AnswerTool): string {
  const value = tool.wrapped && typeof input === 'object' && input !== null ? (input as Record<string, unknown>).value : input;
  return JSON.stringify(value ?? {});
}
