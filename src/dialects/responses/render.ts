// The OpenAI Responses dialect: translates a /v1/responses body into the canonical chat shape and
// renders Response objects and the Responses event stream. Metering lives in chat-call.ts.
import type { CanonicalRequest } from '../../gateway/chat-call.ts';
import { REASONING_EFFORTS } from '../../ledger/price-list.ts';
import { randomBytes } from 'node:crypto';
import { badRequest } from '../../http/errors.ts';
import type { ChatMessage, ChatOutcome, ChatStreamPart, ContentPart, FinishReason, ToolCall, ToolDefinition, Usage } from '../../upstream/port.ts';
import type { SseWriter } from '../../gateway/sse.ts';
import type { StreamRenderer } from '../../gateway/chat-call.ts';
import { withBilledTokens } from '../../gateway/billed-usage.ts';

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

export type { CanonicalRequest } from '../../gateway/chat-call.ts';

const EFFORTS: ReadonlySet<string> = new Set(REASONING_EFFORTS);
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const hex = (bytes: number) => randomBytes(bytes).toString('hex');
export const newId = (prefix: string) => `${prefix}_${hex(24)}`;

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

// ------------------------------------------------------------------ Response objects

export function usageBody(u: Usage) {
  return {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { cached_tokens: u.cached_tokens ?? 0, cache_write_tokens: u.cache_write_tokens ?? 0 },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: u.reasoning_tokens ?? 0 },
    total_tokens: u.prompt_tokens + u.completion_tokens,
  };
}

export interface ResponseShell {
  id: string;
  createdAt: number;
  model: string;
  body: ResponsesBody;
  reasoningEffort?: string;
}

/** The function tools as the Response echoes them. */
function echoedTools(body: ResponsesBody) {
  return (toCanonicalTools(body.tools) ?? []).map((t) => {
    const sent = (body.tools ?? []).find((x) => x.type === 'function' && x.name === t.function.name) ?? {};
    return {
      type: 'function',
      name: t.function.name,
      description: t.function.description ?? null,
      parameters: t.function.parameters ?? null,
      strict: typeof sent.strict === 'boolean' ? sent.strict : null,
    };
  });
}

type Status = 'in_progress' | 'completed' | 'incomplete' | 'failed';

/** A Response object; `usage` is left out until the response is finished. */
export function responseObject(shell: ResponseShell, status: Status, output: Json[], extra: { usage?: Usage; error?: { code: string; message: string } } = {}) {
  const b = shell.body;
  const done = status !== 'in_progress';
  return {
    id: shell.id,
    object: 'response',
    created_at: shell.createdAt,
    status,
    completed_at: status === 'completed' ? Math.floor(Date.now() / 1000) : null,
    error: extra.error ?? null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: typeof b.instructions === 'string' ? b.instructions : null,
    max_output_tokens: b.max_output_tokens ?? null,
    model: shell.model,
    output,
    parallel_tool_calls: b.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: shell.reasoningEffort ?? null, summary: null },
    service_tier: 'default',
    store: false,
    temperature: b.temperature ?? 1,
    text: { format: isObject(b.text?.format) ? b.text!.format : { type: 'text' } },
    tool_choice: toolChoiceOf(b.tool_choice).echo,
    tools: echoedTools(b),
    top_p: b.top_p ?? 1,
    truncation: 'disabled',
    metadata: isObject(b.metadata) ? b.metadata : {},
    ...(done && extra.usage ? { usage: usageBody(extra.usage) } : {}),
  };
}

const statusOf = (reason: FinishReason): Status => (reason === 'length' ? 'incomplete' : 'completed');

function messageItem(id: string, text: string, status: Status) {
  return { id, type: 'message', status, role: 'assistant', content: [{ type: 'output_text', text, annotations: [], logprobs: [] }] };
}

function functionCallItem(id: string, call: { id: string; name: string; arguments: string }, status: Status) {
  return { id, type: 'function_call', status, call_id: call.id, name: call.name, arguments: call.arguments };
}

export function completedResponse(shell: ResponseShell, outcome: ChatOutcome) {
  const status = statusOf(outcome.finishReason);
  const output: Json[] = [];
  if (outcome.content || outcome.toolCalls.length === 0) output.push(messageItem(newId('msg'), outcome.content, status));
  for (const call of outcome.toolCalls)
    output.push(functionCallItem(newId('fc'), { id: call.id, name: call.function.name, arguments: call.function.arguments }, 'completed'));
  return responseObject(shell, status, output, { usage: outcome.usage });
}

// ------------------------------------------------------------------ the event stream

/**
 * response.created, response.in_progress, then per output item: output_item.added, (for a message)
 * content_part.added, output_text.delta..., output_text.done, content_part.done, or (for a function
 * call) function_call_arguments.delta..., .done; output_item.done; finally response.completed
 * (response.incomplete when cut at max_output_tokens, response.failed on an upstream failure).
 */
export function responsesStreamRenderer(sse: SseWriter, shell: ResponseShell): StreamRenderer {
  let seq = 0;
  const emit = (type: string, payload: Json) => sse.event(type, { type, ...payload, sequence_number: seq++ });
  const output: Json[] = [];
  type Open =
    | { kind: 'message'; id: string; index: number; text: string }
    | { kind: 'call'; id: string; index: number; callId: string; name: string; args: string; toolIndex: number };
  let open: Open | null = null;
  const calls = new Map<number, Extract<Open, { kind: 'call' }>>();

  const close = (status: Status) => {
    const o = open;
    if (!o) return;
    open = null;
    if (o.kind === 'message') {
      const part = { type: 'output_text', text: o.text, annotations: [], logprobs: [] };
      emit('response.output_text.done', { item_id: o.id, output_index: o.index, content_index: 0, text: o.text, logprobs: [] });
      emit('response.content_part.done', { item_id: o.id, output_index: o.index, content_index: 0, part });
      const item = messageItem(o.id, o.text, status);
      output[o.index] = item;
      emit('response.output_item.done', { output_index: o.index, item });
    } else {
      emit('response.function_call_arguments.done', { item_id: o.id, output_index: o.index, name: o.name, arguments: o.args });
      const item = functionCallItem(o.id, { id: o.callId, name: o.name, arguments: o.args }, 'completed');
      output[o.index] = item;
      emit('response.output_item.done', { output_index: o.index, item });
    }
  };

  emit('response.created', { response: responseObject(shell, 'in_progress', []) });
  emit('response.in_progress', { response: responseObject(shell, 'in_progress', []) });

  return {
    text(text) {
      if (open?.kind !== 'message') {
        close('completed');
        const o: Open = { kind: 'message', id: newId('msg'), index: output.length, text: '' };
        output.push(messageItem(o.id, '', 'in_progress'));
        open = o;
        emit('response.output_item.added', {
          output_index: o.index,
          item: { id: o.id, type: 'message', status: 'in_progress', role: 'assistant', content: [] },
        });
        emit('response.content_part.added', {
          item_id: o.id,
          output_index: o.index,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
        });
      }
      const o = open as Extract<Open, { kind: 'message' }>;
      o.text += text;
      emit('response.output_text.delta', { item_id: o.id, output_index: o.index, content_index: 0, delta: text, logprobs: [] });
    },
    toolCall(part: Extract<ChatStreamPart, { type: 'tool_call' }>) {
      let o = calls.get(part.index);
      if (!o || part.id) {
        close('completed');
        o = { kind: 'call', id: newId('fc'), index: output.length, callId: part.id ?? newId('call'), name: part.name ?? '', args: '', toolIndex: part.index };
        calls.set(part.index, o);
        const item = functionCallItem(o.id, { id: o.callId, name: o.name, arguments: '' }, 'in_progress');
        output.push(item);
        open = o;
        emit('response.output_item.added', { output_index: o.index, item });
      }
      if (part.arguments) {
        o.args += part.arguments;
        emit('response.function_call_arguments.delta', { item_id: o.id, output_index: o.index, delta: part.arguments });
      }
    },
    finish(reason, usage, billing) {
      const status = statusOf(reason);
      close(status);
      if (output.length === 0) {
        // Nothing was generated: still give the client one (empty) message, as a finished reply has.
        const item = messageItem(newId('msg'), '', status);
        output.push(item);
        emit('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } });
        emit('response.output_item.done', { output_index: 0, item });
      }
      emit(
        status === 'completed' ? 'response.completed' : 'response.incomplete',
        withBilledTokens({ response: responseObject(shell, status, output, { usage }) }, billing.billed),
      );
    },
    error(message) {
      emit('response.failed', { response: responseObject(shell, 'failed', output.filter(Boolean), { error: { code: 'server_error', message } }) });
    },
  };
}
