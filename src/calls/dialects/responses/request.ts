// The OpenAI Responses dialect, requests: translates a /v1/responses body into the canonical chat
// shape (messages, tools, tool choice, parameters), refusing what a gateway that stores nothing
// cannot do. Rendering is in render.ts; metering lives in chat-call.ts.
import type { CanonicalRequest } from '../../chat-call.ts';
import { REASONING_EFFORTS } from '../../../catalogue/index.ts';
import { badRequest } from '../../../http/errors.ts';
import type { ChatMessage, ContentPart, ToolCall, ToolDefinition } from '../../../upstream/port.ts';

type Json = Record<string, unknown>;

export interface ResponsesBody {
  model: string;
  input: string | Json[];
  instructions?: string | null;
  tools?: Json[];
  tool_choice?: unknown;
  max_output_tokens?: number | null;
  reasoning?: { effort?: unknown } | null;
  stream?: boolean | null;
  temperature?: number | null;
  top_p?: number | null;
  parallel_tool_calls?: boolean | null;
  previous_response_id?: string | null;
  conversation?: unknown;
  background?: boolean | null;
  text?: { format?: Json } | null;
  metadata?: Record<string, string> | null;
  user?: string;
  [field: string]: unknown;
}

const EFFORTS: ReadonlySet<string> = new Set(REASONING_EFFORTS);
export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Text and image parts of a message's content list (input_text, output_text, input_image). */
function contentParts(content: unknown, where: string): ContentPart[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw badRequest(`Invalid value for '${where}.content': expected a string or a list of content parts.`, `${where}.content`);
  const parts: ContentPart[] = [];
  content.forEach((p, i) => {
    if (!isObject(p)) return;
    if ((p.type === 'input_text' || p.type === 'output_text' || p.type === 'text') && typeof p.text === 'string') parts.push({ type: 'text', text: p.text });
    else if (p.type === 'refusal' && typeof p.refusal === 'string') parts.push({ type: 'text', text: p.refusal });
    else if (p.type === 'input_image') {
      const url = typeof p.image_url === 'string' ? p.image_url : isObject(p.image_url) && typeof p.image_url.url === 'string' ? p.image_url.url : null;
      if (!url) throw badRequest(`'${where}.content[${i}]': input_image needs an image_url (file_id is not supported).`, `${where}.content[${i}].image_url`);
      parts.push({ type: 'image_url', image_url: { url } });
    }
    // input_file, input_audio and unknown parts are skipped.
  });
  return parts;
}

const textOf = (parts: ContentPart[]) =>
  parts
    .filter((p) => p.type === 'text')
    .map((p) => (p as { text: string }).text)
    .join('\n');
const simplify = (parts: ContentPart[]): string | ContentPart[] => (parts.every((p) => p.type === 'text') ? textOf(parts) : parts);

function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  if (Array.isArray(output)) return textOf(contentParts(output, 'output'));
  return output === undefined || output === null ? '' : JSON.stringify(output);
}

/** `instructions` + `input` as canonical chat messages. */
export function toCanonicalMessages(body: Pick<ResponsesBody, 'instructions' | 'input'>): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (typeof body.instructions === 'string' && body.instructions) out.push({ role: 'system', content: body.instructions });
  if (typeof body.input === 'string') {
    out.push({ role: 'user', content: body.input });
    return out;
  }
  const addToolCall = (call: ToolCall) => {
    const last = out.at(-1);
    // Calls made in one turn travel in one assistant message, after any text of that turn.
    if (last?.role === 'assistant') (last.tool_calls ??= []).push(call);
    else out.push({ role: 'assistant', content: null, tool_calls: [call] });
  };
  body.input.forEach((item, i) => {
    const where = `input[${i}]`;
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
    switch (type) {
      case 'message': {
        const role = item.role;
        if (role !== 'user' && role !== 'assistant' && role !== 'system' && role !== 'developer') {
          throw badRequest(`Invalid value for '${where}.role': expected one of "user", "assistant", "system", "developer".`, `${where}.role`);
        }
        const parts = contentParts(item.content, where);
        if (role === 'assistant') {
          const text = textOf(parts);
          const last = out.at(-1);
          if (last?.role === 'assistant' && !last.tool_calls && typeof last.content === 'string') last.content += text;
          else if (text) out.push({ role: 'assistant', content: text });
        } else if (role === 'user') {
          if (parts.length) out.push({ role: 'user', content: simplify(parts) });
        } else if (parts.length) {
          // developer messages are system messages to chat-completions upstreams.
          out.push({ role: 'system', content: textOf(parts) });
        }
        return;
      }
      case 'function_call':
        if (typeof item.call_id !== 'string' || typeof item.name !== 'string')
          throw badRequest(`'${where}': a function_call item needs call_id and name.`, where);
        addToolCall({
          id: item.call_id,
          type: 'function',
          function: { name: item.name, arguments: typeof item.arguments === 'string' ? item.arguments : JSON.stringify(item.arguments ?? {}) },
        });
        return;
      case 'custom_tool_call':
        if (typeof item.call_id !== 'string' || typeof item.name !== 'string')
          throw badRequest(`'${where}': a custom_tool_call item needs call_id and name.`, where);
        addToolCall({ id: item.call_id, type: 'function', function: { name: item.name, arguments: JSON.stringify({ input: item.input ?? '' }) } });
        return;
      case 'local_shell_call':
        if (typeof item.call_id !== 'string') return;
        addToolCall({ id: item.call_id, type: 'function', function: { name: 'local_shell', arguments: JSON.stringify(item.action ?? {}) } });
        return;
      case 'function_call_output':
      case 'custom_tool_call_output':
      case 'local_shell_call_output':
        if (typeof item.call_id !== 'string') throw badRequest(`'${where}.call_id': required.`, `${where}.call_id`);
        out.push({ role: 'tool', tool_call_id: item.call_id, content: outputText(item.output) });
        return;
      case 'item_reference':
        throw badRequest(`'${where}': item references are not supported (nothing is stored); send the items themselves.`, where);
      default:
        // reasoning items (encrypted or summarised) and hosted-tool items carry nothing to forward.
        return;
    }
  });
  return out;
}

/** Function tools only: hosted and freeform tools (web_search, local_shell, custom, ...) are left out. */
export function toCanonicalTools(tools: unknown): ToolDefinition[] | undefined {
  if (!Array.isArray(tools)) return undefined;
  const out: ToolDefinition[] = [];
  tools.forEach((t, i) => {
    if (!isObject(t) || t.type !== 'function') return;
    if (typeof t.name !== 'string' || !t.name) throw badRequest(`Missing required parameter: 'tools[${i}].name'.`, `tools[${i}].name`);
    out.push({
      type: 'function',
      function: {
        name: t.name,
        ...(typeof t.description === 'string' ? { description: t.description } : {}),
        ...(isObject(t.parameters) ? { parameters: t.parameters } : {}),
      },
    });
  });
  return out.length ? out : undefined;
}

/** The Responses tool_choice as chat-completions tool_choice, plus the value to echo back. */
export function toolChoiceOf(choice: unknown): { canonical: unknown; echo: string | Json } {
  if (choice === 'auto' || choice === 'none' || choice === 'required') return { canonical: choice, echo: choice };
  if (isObject(choice)) {
    if (choice.type === 'function' && typeof choice.name === 'string')
      return { canonical: { type: 'function', function: { name: choice.name } }, echo: { type: 'function', name: choice.name } };
    if (choice.type === 'allowed_tools' && (choice.mode === 'auto' || choice.mode === 'required')) return { canonical: choice.mode, echo: choice.mode };
  }
  return { canonical: undefined, echo: 'auto' };
}

export function toCanonical(body: ResponsesBody): CanonicalRequest {
  if (body.previous_response_id) {
    throw badRequest(
      "'previous_response_id' is not supported: this gateway stores no responses. Send the whole conversation in 'input' (with store: false).",
      'previous_response_id',
      'unsupported_parameter',
    );
  }
  if (body.conversation !== undefined && body.conversation !== null) {
    throw badRequest(
      "'conversation' is not supported: this gateway stores no conversations. Send the whole conversation in 'input'.",
      'conversation',
      'unsupported_parameter',
    );
  }
  if (body.background) throw badRequest("'background' is not supported: responses are returned directly or streamed.", 'background', 'unsupported_parameter');
  const params: Record<string, unknown> = {};
  if (typeof body.temperature === 'number') params.temperature = body.temperature;
  if (typeof body.top_p === 'number') params.top_p = body.top_p;
  if (typeof body.parallel_tool_calls === 'boolean') params.parallel_tool_calls = body.parallel_tool_calls;
  const format = body.text?.format;
  if (isObject(format) && format.type === 'json_schema' && isObject(format.schema)) {
    params.response_format = {
      type: 'json_schema',
      json_schema: {
        name: typeof format.name === 'string' ? format.name : 'response',
        schema: format.schema,
        ...(typeof format.strict === 'boolean' ? { strict: format.strict } : {}),
      },
    };
  } else if (isObject(format) && format.type === 'json_object') {
    params.response_format = { type: 'json_object' };
  }
  // Nothing to answer is a 400 before anything is reserved or charged (as OpenAI refuses it).
  if (Array.isArray(body.input) && body.input.length === 0) {
    throw badRequest("Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.", 'input', 'empty_array');
  }
  if (body.input === '') {
    throw badRequest("Invalid 'input': empty string. Expected a string with minimum length 1, but got an empty string instead.", 'input', 'empty_string');
  }
  const messages = toCanonicalMessages(body);
  if (messages.length === 0) {
    throw badRequest("Invalid 'input': no message or tool output to respond to (its items carry no content).", 'input', 'invalid_value');
  }
  const tools = toCanonicalTools(body.tools);
  const effort = body.reasoning?.effort;
  return {
    messages,
    tools,
    params,
    toolChoice: tools ? toolChoiceOf(body.tool_choice).canonical : undefined,
    reasoningEffort: typeof effort === 'string' && EFFORTS.has(effort) ? effort : undefined,
  };
}
