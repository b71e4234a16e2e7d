// chat / chatStream: canonical calls translated to Messages, replies translated back.
import type { ChatCall, ChatOutcome, ChatStreamPart } from '../port.ts';
import { readJson } from '../upstream-http.ts';
import { sendMessages, type MessagesEndpoint } from './endpoint.ts';
import { isObject } from './json.ts';
import { answerText } from './structured.ts';
import { anthropicEvents } from './stream.ts';
import { chatOutcomeOf, finishReasonOf, messagesRequest } from './translate.ts';
import { chatSecrets } from '../openai-chat-wire.ts';
import { UsageTracker } from './usage.ts';

/** The upstream models that take response_format as output_config.format (see structured.ts). */
export type StructuredOutputModels = readonly string[];

export async function chat(endpoint: MessagesEndpoint, call: ChatCall, structuredOutputModels: StructuredOutputModels): Promise<ChatOutcome> {
  const request = messagesRequest(call, false, structuredOutputModels);
  const { response, deadline } = await sendMessages(endpoint, 'messages', request.body, {
    op: 'chat',
    signal: call.signal,
    secrets: chatSecrets(call),
  });
  return chatOutcomeOf(await readJson(response, 'chat', call.signal, deadline), request.answerTool);
}

interface StreamedTool {
  index: number;
  /** Whether any argument text was passed on yet. */
  hasArguments: boolean;
}

export async function* chatStream(endpoint: MessagesEndpoint, call: ChatCall, structuredOutputModels: StructuredOutputModels): AsyncGenerator<ChatStreamPart> {
  const op = 'chat stream';
  const secrets = [endpoint.target.apiKey, ...chatSecrets(call)];
  const { answerTool, body } = messagesRequest(call, true, structuredOutputModels);
  const { response, deadline } = await sendMessages(endpoint, 'messages', body, {
    op,
    accept: 'text/event-stream',
    signal: call.signal,
    secrets,
  });
  const usage = new UsageTracker();
  // tool_use blocks by content-block index; tool call indexes count tool_use blocks only.
  const tools = new Map<number, StreamedTool>();
  // The answer tool's block, whose input JSON is the reply's text; a wrapped answer ({value}) is
  // gathered and unwrapped when its block ends.
  let answerBlock: { index: number; streamed: boolean; gathered: string } | undefined;
  let upstreamId: string | undefined;
  let stopReason: unknown;

  for await (const event of anthropicEvents(response, { op, signal: call.signal, deadline, secrets })) {
    const { json } = event;
    const blockIndex = typeof json.index === 'number' ? json.index : -1;
    switch (event.type) {
      case 'message_start':
        if (isObject(json.message)) {
          if (typeof json.message.id === 'string') upstreamId = json.message.id;
          usage.merge(json.message.usage);
        }
        break;
      case 'content_block_start': {
        const block = isObject(json.content_block) ? json.content_block : {};
        if (block.type === 'tool_use' && answerTool && block.name === answerTool.name) {
          answerBlock = { index: blockIndex, streamed: false, gathered: '' };
        } else if (block.type === 'tool_use') {
          const tool: StreamedTool = { index: tools.size, hasArguments: false };
          tools.set(blockIndex, tool);
          const part: ChatStreamPart = { type: 'tool_call', index: tool.index };
          if (typeof block.id === 'string') part.id = block.id;
          if (typeof block.name === 'string') part.name = block.name;
          yield part;
        } else if (block.type === 'text' && typeof block.text === 'string' && block.text !== '') {
          yield { type: 'text', text: block.text };
        }
        break;
      }
      case 'content_block_delta': {
        const delta = isObject(json.delta) ? json.delta : {};
        if (delta.type === 'text_delta' && typeof delta.text === 'string' && delta.text !== '') {
          yield { type: 'text', text: delta.text };
        } else if (delta.type === 'input_json_delta' && answerBlock?.index === blockIndex && typeof delta.partial_json === 'string') {
          answerBlock.gathered += delta.partial_json;
          if (!answerTool!.wrapped && delta.partial_json !== '') {
            answerBlock.streamed = true;
            yield { type: 'text', text: delta.partial_json };
          }
        } else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string' && delta.partial_json !== '') {
          const tool = tools.get(blockIndex);
          if (tool) {
            tool.hasArguments = true;
            yield { type: 'tool_call', index: tool.index, arguments: delta.partial_json };
          }
        }
        // thinking, signatures and citations are not shown to chat callers.
        break;
      }
      case 'content_block_stop': {
        if (answerBlock?.index === blockIndex && !answerBlock.streamed) {
          answerBlock.streamed = true;
          yield { type: 'text', text: answerText(parsedOrEmpty(answerBlock.gathered), answerTool!) };
          break;
        }
        // A tool called without input streams no JSON at all; chat callers expect "{}".
        const tool = tools.get(blockIndex);
        if (tool && !tool.hasArguments) {
          tool.hasArguments = true;
          yield { type: 'tool_call', index: tool.index, arguments: '{}' };
        }
        break;
      }
      case 'message_delta':
        usage.merge(json.usage);
        if (isObject(json.delta) && json.delta.stop_reason != null) stopReason = json.delta.stop_reason;
        break;
      default:
        break; // ping, message_stop, and event types this adapter does not know
    }
  }
  // anthropicEvents returned, so message_stop arrived.
  const finish: ChatStreamPart = {
    type: 'finish',
    finishReason: finishReasonOf(stopReason, tools.size > 0, answerBlock !== undefined),
    usage: usage.usage(op),
  };
  if (upstreamId !== undefined) finish.upstreamId = upstreamId;
  yield finish;
}

/** A streamed tool input, parsed once whole; what cannot be parsed stands as an empty object. */
function parsedOrEmpty(json: string): unknown {
  try {
    return JSON.parse(json === '' ? '{}' : json);
  } catch {
    return {};
  }
}
