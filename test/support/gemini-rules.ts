// Which generateContent requests the Gemini double refuses with 400 INVALID_ARGUMENT, as Google
// does, with Google's wording where it is known: fields the API does not have (Google's proto JSON
// takes lowerCamel or snake_case names), parts without exactly one kind of data, roles other than
// user and model (and "function", which older Gemini examples use), Gemini's function-calling turn rules (a call right after a user turn or a function
// response, as many responses as calls), Gemini 3's thought signature on the current turn's first
// function call of each step (any non-empty one, Google's documented dummy values included),
// function names and duplicates, the calling mode, generationConfig's ranges and pairings, and the
// thinking budgets a model takes (a Pro model never 0, at most 24576 on Flash and 32768 on Pro).
import { isObject } from './gemini-wire.ts';

type Json = Record<string, any>;

const TOP_LEVEL = [
  'contents',
  'systemInstruction',
  'tools',
  'toolConfig',
  'safetySettings',
  'generationConfig',
  'cachedContent',
  'model',
  'labels',
  'serviceTier',
  'store',
  'continuationToken',
];
const GENERATION = [
  'stopSequences',
  'responseMimeType',
  'responseSchema',
  'responseJsonSchema',
  'candidateCount',
  'maxOutputTokens',
  'temperature',
  'topP',
  'topK',
  'seed',
  'presencePenalty',
  'frequencyPenalty',
  'responseLogprobs',
  'logprobs',
  'enableEnhancedCivicAnswers',
  'responseModalities',
  'speechConfig',
  'thinkingConfig',
  'mediaResolution',
  'imageConfig',
];
const THINKING = ['thinkingBudget', 'includeThoughts', 'thinkingLevel'];
const PART = [
  'text',
  'inlineData',
  'fileData',
  'functionCall',
  'functionResponse',
  'executableCode',
  'codeExecutionResult',
  'thought',
  'thoughtSignature',
  'videoMetadata',
  'partMetadata',
  'mediaResolution',
];
const PART_DATA = ['text', 'inlineData', 'fileData', 'functionCall', 'functionResponse', 'executableCode', 'codeExecutionResult'];
const MIME_TYPES = ['text/plain', 'application/json', 'application/xml', 'application/yaml', 'text/x.enum'];
const MODES = ['MODE_UNSPECIFIED', 'AUTO', 'ANY', 'NONE', 'VALIDATED'];
const FUNCTION_NAME = /^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/;

/** Proto JSON takes a field's lowerCamel name or its snake_case one. */
const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
function unknownField(object: Json, known: string[]): string | undefined {
  const names = new Set([...known, ...known.map(snake)]);
  return Object.keys(object).find((key) => !names.has(key));
}
const unknownName = (name: string) => `Invalid JSON payload received. Unknown name "${name}": Cannot find field.`;

export interface Refusal {
  message: string;
  details?: unknown[];
}

function fieldViolation(message: string): Refusal {
  return { message, details: [{ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ description: message }] }] };
}

/** Why Google would refuse this generateContent body (400 INVALID_ARGUMENT), or null. */
export function invalidGenerate(model: string, body: Json): Refusal | null {
  const bad = (path: string, what: string): Refusal => ({ message: `* GenerateContentRequest.${path}: ${what}\n` });
  const unknown = unknownField(body, TOP_LEVEL);
  if (unknown) return fieldViolation(unknownName(unknown));
  if (!Array.isArray(body.contents) || body.contents.length === 0) return bad('contents', 'contents is not specified');
  for (const [i, content] of body.contents.entries()) {
    if (!isObject(content)) return fieldViolation(`Invalid value at 'contents[${i}]', must be an object`);
    const field = unknownField(content, ['role', 'parts']);
    if (field) return fieldViolation(unknownName(`contents[${i}].${field}`));
    if (content.role !== undefined && !['user', 'model', 'function'].includes(content.role)) return { message: 'Please use a valid role: user, model.' };
    if (!Array.isArray(content.parts) || content.parts.length === 0) return bad(`contents[${i}].parts`, 'contents.parts must not be empty.');
    for (const [j, part] of content.parts.entries()) {
      const problem = invalidPart(part, `contents[${i}].parts[${j}]`);
      if (problem) return problem;
    }
  }
  const system = body.systemInstruction ?? body.system_instruction;
  if (system !== undefined && !(isObject(system) && Array.isArray(system.parts) && system.parts.every((p: unknown) => !invalidPart(p, '')))) {
    return bad('system_instruction.parts', 'system_instruction must contain parts with data');
  }
  return invalidTurns(model, body.contents) ?? invalidTools(body) ?? invalidGeneration(model, body.generationConfig ?? body.generation_config);
}

function invalidPart(part: unknown, path: string): Refusal | null {
  if (!isObject(part)) return fieldViolation(`Invalid value at '${path}', must be an object`);
  const field = unknownField(part, PART);
  if (field) return fieldViolation(unknownName(`${path}.${field}`));
  const data = PART_DATA.filter((k) => part[k] !== undefined || part[snake(k)] !== undefined);
  if (data.length !== 1) return { message: `* GenerateContentRequest.${path}.data: required oneof field 'data' must have one initialized field\n` };
  const inline = part.inlineData ?? part.inline_data;
  if (
    inline !== undefined &&
    !(isObject(inline) && typeof inline.mimeType === 'string' && typeof inline.data === 'string' && /^[A-Za-z0-9+/_-]*=*$/.test(inline.data))
  ) {
    return fieldViolation(`Invalid value at '${path}.inline_data' (data): Base64 decoding failed, or mime_type is missing`);
  }
  const call = part.functionCall;
  if (call !== undefined && !(isObject(call) && typeof call.name === 'string' && (call.args === undefined || isObject(call.args)))) {
    return { message: `* GenerateContentRequest.${path}.function_call.name: Name cannot be empty; args must be an object.\n` };
  }
  const response = part.functionResponse;
  if (response !== undefined && !(isObject(response) && typeof response.name === 'string' && response.name !== '' && isObject(response.response))) {
    return { message: `* GenerateContentRequest.${path}.function_response: name must be set and response must be an object.\n` };
  }
  return null;
}

/** Gemini's turn rules for function calling, and Gemini 3's thought signatures on the current turn. */
function invalidTurns(model: string, contents: Json[]): Refusal | null {
  const calls = (c: Json) => c.parts.filter((p: Json) => isObject(p.functionCall));
  const responses = (c: Json) => c.parts.filter((p: Json) => isObject(p.functionResponse)).length;
  for (const [i, content] of contents.entries()) {
    if (content.role !== 'model' || calls(content).length === 0) continue;
    if (i === 0 || contents[i - 1]!.role === 'model') {
      return { message: 'Please ensure that function call turn comes immediately after a user turn or after a function response turn.' };
    }
    const next = contents[i + 1];
    if (next && responses(next) > 0 && responses(next) !== calls(content).length) {
      return {
        message: 'Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.',
      };
    }
  }
  if (!model.startsWith('gemini-3')) return null;
  // The current turn: what follows the last user content that is not only function responses.
  let start = 0;
  contents.forEach((c, i) => {
    if (c.role !== 'model' && c.parts.some((p: Json) => !isObject(p.functionResponse))) start = i;
  });
  for (const [i, content] of contents.entries()) {
    if (i < start || content.role !== 'model') continue;
    const first = calls(content)[0];
    if (first && !(typeof first.thoughtSignature === 'string' && first.thoughtSignature !== '')) {
      return {
        message: `Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call \`default_api:${first.functionCall.name}\` , position ${i + 1}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.`,
      };
    }
  }
  return null;
}

function invalidTools(body: Json): Refusal | null {
  const tools = body.tools;
  const declared = new Set<string>();
  if (tools !== undefined) {
    if (!Array.isArray(tools)) return fieldViolation(`Invalid value at 'tools' (type.googleapis.com/google.ai.generativelanguage.v1beta.Tool), must be a list`);
    for (const [i, tool] of tools.entries()) {
      if (!isObject(tool)) return fieldViolation(`Invalid value at 'tools[${i}]', must be an object`);
      for (const [j, f] of (Array.isArray(tool.functionDeclarations) ? tool.functionDeclarations : []).entries()) {
        const path = `* GenerateContentRequest.tools[${i}].function_declarations[${j}]`;
        if (!isObject(f) || typeof f.name !== 'string' || !FUNCTION_NAME.test(f.name)) {
          return {
            message: `${path}.name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 64.\n`,
          };
        }
        if (declared.has(f.name)) return { message: `Duplicate function declaration found: ${f.name}` };
        declared.add(f.name);
        if (f.parameters !== undefined && f.parametersJsonSchema !== undefined) {
          return { message: `${path}.parameters_json_schema: parameters_json_schema must not be set when parameters is set.\n` };
        }
      }
    }
  }
  const config = isObject(body.toolConfig) && isObject(body.toolConfig.functionCallingConfig) ? body.toolConfig.functionCallingConfig : {};
  const path = '* GenerateContentRequest.tool_config.function_calling_config';
  if (config.mode !== undefined && !MODES.includes(config.mode))
    return fieldViolation(`Invalid value at 'tool_config.function_calling_config.mode', "${config.mode}"`);
  const allowed = config.allowedFunctionNames;
  if (allowed !== undefined) {
    if (!['ANY', 'VALIDATED'].includes(config.mode)) return { message: `${path}.allowed_function_names: only allowed when mode is ANY or VALIDATED.\n` };
    const missing = (allowed as unknown[]).find((n) => !declared.has(String(n)));
    if (missing !== undefined) return { message: `${path}.allowed_function_names: function ${String(missing)} is not declared in tools.\n` };
  }
  return null;
}

function invalidGeneration(model: string, config: unknown): Refusal | null {
  if (config === undefined) return null;
  if (!isObject(config)) return fieldViolation(`Invalid value at 'generation_config', must be an object`);
  const field = unknownField(config, GENERATION);
  if (field) return fieldViolation(unknownName(`generation_config.${field}`));
  const bad = (field: string, what: string): Refusal => ({ message: `* GenerateContentRequest.generation_config.${field}: ${what}\n` });
  const { maxOutputTokens: max, temperature, topP, candidateCount, stopSequences, responseMimeType: mime } = config;
  if (max !== undefined && !(Number.isInteger(max) && max >= 1)) return bad('max_output_tokens', 'max_output_tokens must be positive.');
  if (temperature !== undefined && !(typeof temperature === 'number' && temperature >= 0 && temperature <= 2)) {
    return bad('temperature', 'temperature must be in the range [0.0, 2.0].');
  }
  if (topP !== undefined && !(typeof topP === 'number' && topP >= 0 && topP <= 1)) return bad('top_p', 'top_p must be in the range [0.0, 1.0].');
  if (candidateCount !== undefined && !(Number.isInteger(candidateCount) && candidateCount >= 1 && candidateCount <= 8)) {
    return bad('candidate_count', 'candidate_count must be in the range [1, 8].');
  }
  if (stopSequences !== undefined && !(Array.isArray(stopSequences) && stopSequences.length <= 5 && stopSequences.every((s) => typeof s === 'string'))) {
    return bad('stop_sequences', 'at most 5 stop sequences are allowed.');
  }
  if (mime !== undefined && !MIME_TYPES.includes(mime)) {
    return bad('response_mime_type', 'allowed mimetypes are `text/plain`, `application/json`, `application/xml`, `application/yaml` and `text/x.enum`.');
  }
  if (config.responseSchema !== undefined && config.responseJsonSchema !== undefined) {
    return bad('response_schema', 'response_schema and response_json_schema cannot both be set.');
  }
  if ((config.responseSchema !== undefined || config.responseJsonSchema !== undefined) && !['application/json', 'text/x.enum'].includes(mime)) {
    return bad('response_mime_type', 'When using response_schema, response_mime_type must be `application/json` or `text/x.enum`.');
  }
  const thinking = config.thinkingConfig;
  if (thinking !== undefined) {
    const field = isObject(thinking) ? unknownField(thinking, THINKING) : 'thinking_config';
    if (field) return fieldViolation(unknownName(`generation_config.thinking_config.${field}`));
    if (thinking.thinkingBudget !== undefined && !(Number.isInteger(thinking.thinkingBudget) && thinking.thinkingBudget >= -1)) {
      return bad('thinking_config.thinking_budget', 'thinking_budget must be -1, 0 or positive.');
    }
    if (thinking.thinkingBudget !== undefined && thinking.thinkingLevel !== undefined) {
      return { message: 'You can only set only one of thinking budget and thinking level.' };
    }
    return invalidThinking(model, thinking.thinkingBudget, thinking.thinkingLevel);
  }
  return null;
}

/** A Pro model cannot stop thinking; a Flash model thinks at most 24576 tokens, a Pro one 32768; levels are Gemini 3's. */
function invalidThinking(model: string, budget: unknown, level: unknown): Refusal | null {
  const pro = /-pro\b/.test(model);
  if (budget === 0 && pro) return { message: 'Budget 0 is invalid. This model only works in thinking mode.' };
  if (typeof budget === 'number' && budget > (pro ? 32768 : 24576)) return { message: `The thinking budget (${budget}) is invalid.` };
  if (level !== undefined && !model.startsWith('gemini-3')) return { message: 'Thinking level is not supported for this model.' };
  return null;
}
