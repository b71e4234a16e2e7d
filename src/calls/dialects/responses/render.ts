// The OpenAI Responses dialect, answers: renders Response objects and the Responses event stream
// from the canonical outcome. Requests are translated in request.ts; metering lives in chat-call.ts.
import { randomBytes } from 'node:crypto';
import type { ChatOutcome, ChatStreamPart, FinishReason, Usage } from '../../../upstream/port.ts';
import type { SseWriter } from '../../../http/sse.ts';
import type { StreamRenderer } from '../../chat-results.ts';
import { withBilledTokens } from '../../billed-usage.ts';
import { isObject, toCanonicalTools, toolChoiceOf, type ResponsesBody } from './request.ts';

type Json = Record<string, unknown>;

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
export const newId = (prefix: string) => `${prefix}_${hex(24)}`;

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
