// A canonical chat call as a Bedrock Converse request (messages, system, inference config, tools,
// structured output), and a Converse reply as the port's outcome. Pure: no client, no I/O.
import type { ContentBlock, ConverseRequest, ConverseResponse, Message, SystemContentBlock, Tool, ToolChoice } from '@aws-sdk/client-bedrock-runtime';
import { UpstreamError, type ChatCall, type ChatMessage, type ChatOutcome, type FinishReason, type ToolCall } from '../port.ts';
import { responseFormatOf } from '../response-format.ts';
import { messageText, systemPrompt, toolArguments, wireToolCallId } from '../canonical-messages.ts';
import { thinkingFor } from '../anthropic/translate.ts';
import { usageOf } from './usage.ts';

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

export type ConverseInput = Omit<ConverseRequest, 'modelId'>;

const IMAGE_FORMATS = new Set(['png', 'jpeg', 'gif', 'webp']);
/** Converse's toolUseId: 1 to 64 letters, digits, _ and -. */
const TOOL_USE_ID_LENGTH = 64;

/** base64 data: URLs become image bytes; Bedrock fetches no URL, so others are refused. */
function imageBlock(url: string): ContentBlock {
  const match = /^data:image\/([a-z]+)((?:;[^;,]*)*),(.*)$/is.exec(url);
  const format = match?.[1]?.toLowerCase().replace('jpg', 'jpeg');
  if (match && format && IMAGE_FORMATS.has(format) && /;base64/i.test(match[2] ?? ''))
    return { image: { format: format as 'png', source: { bytes: Buffer.from(match[3]!, 'base64') } } };
  // The URL itself is never echoed: it may be a signed link.
  throw new UpstreamError('bedrock upstreams take images as base64 data: URLs of PNG, JPEG, GIF or WebP only', undefined, 'request');
}

function userBlocks(content: ChatMessage['content']): ContentBlock[] {
  if (typeof content === 'string') return content === '' ? [] : [{ text: content }];
  return (content ?? []).map((part) => (part.type === 'text' ? { text: part.text } : imageBlock(part.image_url.url)));
}

/** A tool's result: JSON objects as a json block, anything else as text. */
function toolResultBlock(id: string, text: string): ContentBlock {
  try {
    const value: unknown = JSON.parse(text);
    if (isObject(value)) return { toolResult: { toolUseId: id, content: [{ json: value as never }] } };
  } catch {
    // plain text
  }
  return { toolResult: { toolUseId: id, content: [{ text: text === '' ? '(empty)' : text }] } };
}

/** Bedrock's explicit prompt cache: everything before this block is cached. */
const CACHE_POINT = { cachePoint: { type: 'default' } } as const;

/**
 * The conversation as Converse messages: tool results go back in the user's turn, and
 * consecutive turns of one role are merged (Converse wants the roles to alternate). A message the
 * caller marked for caching ends with a cache point.
 */
function messagesOf(messages: ChatMessage[]): Message[] {
  const out: Message[] = [];
  const add = (role: 'user' | 'assistant', blocks: ContentBlock[]) => {
    if (blocks.length === 0) return;
    const last = out.at(-1);
    if (last?.role === role) last.content!.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const message of messages) {
    if (message.role === 'system' || message.role === 'developer') continue;
    const { role, blocks } = turnOf(message);
    if (message.cacheBreakpoint && blocks.length > 0) blocks.push(CACHE_POINT);
    add(role, blocks);
  }
  return out;
}

/** One canonical message's blocks, and whose turn they belong to (tool results are the user's). */
function turnOf(message: ChatMessage): { role: 'user' | 'assistant'; blocks: ContentBlock[] } {
  if (message.role === 'tool')
    return { role: 'user', blocks: [toolResultBlock(wireToolCallId(message.tool_call_id ?? 'call', TOOL_USE_ID_LENGTH), messageText(message.content))] };
  if (message.role !== 'assistant') return { role: 'user', blocks: userBlocks(message.content) };
  const blocks: ContentBlock[] = [];
  const text = messageText(message.content);
  if (text !== '') blocks.push({ text });
  for (const call of message.tool_calls ?? []) {
    blocks.push({
      toolUse: { toolUseId: wireToolCallId(call.id, TOOL_USE_ID_LENGTH), name: call.function.name, input: toolArguments(call.function.arguments) as never },
    });
  }
  return { role: 'assistant', blocks };
}

/** OpenAI's tool_choice in Converse's shape (`none` has no equivalent: see converseInput). */
function toolChoiceOf(choice: unknown): ToolChoice | undefined {
  if (choice === 'auto') return { auto: {} };
  if (choice === 'required') return { any: {} };
  if (isObject(choice) && isObject(choice.function) && typeof choice.function.name === 'string') return { tool: { name: choice.function.name } };
  return undefined;
}

const numberParam = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);

/** Anthropic's models on Bedrock take Anthropic's own thinking block through additionalModelRequestFields. */
const isAnthropicModel = (modelId: string): boolean => /(^|\.)anthropic\.|claude/i.test(modelId);

export function converseInput(call: ChatCall): ConverseInput {
  const input: ConverseInput = { messages: messagesOf(call.messages), inferenceConfig: { maxTokens: call.maxTokens } };
  const system = systemPrompt(call.messages);
  const cacheSystem = call.messages.some((m) => (m.role === 'system' || m.role === 'developer') && m.cacheBreakpoint);
  if (system !== '') input.system = cacheSystem ? [{ text: system }, CACHE_POINT] : [{ text: system } as SystemContentBlock];
  const p = call.params;
  const temperature = numberParam(p.temperature);
  const topP = numberParam(p.top_p);
  if (temperature !== undefined) input.inferenceConfig!.temperature = temperature;
  if (topP !== undefined) input.inferenceConfig!.topP = topP;
  const stop = typeof p.stop === 'string' ? [p.stop] : Array.isArray(p.stop) && p.stop.every((s) => typeof s === 'string') ? (p.stop as string[]) : [];
  if (stop.length > 0) input.inferenceConfig!.stopSequences = stop;
  const format = responseFormatOf(p);
  if (format) {
    const schema = format.type === 'json_schema' ? format.schema : { type: 'object' };
    const name = format.type === 'json_schema' ? format.name : 'response';
    input.outputConfig = { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: JSON.stringify(schema), name } } } };
  }
  const thinking = isAnthropicModel(call.upstreamModel) ? thinkingFor(call.reasoningEffort, call.maxTokens) : undefined;
  if (thinking) input.additionalModelRequestFields = { thinking } as never;
  // Converse has no `none`: the tools are left out, unless the conversation already holds tool
  // blocks, which Converse refuses without a toolConfig (the model may then still call one).
  const noTools = call.toolChoice === 'none' && !call.messages.some((m) => m.role === 'tool' || (m.tool_calls?.length ?? 0) > 0);
  if (call.tools && call.tools.length > 0 && !noTools) {
    const tools: Tool[] = call.tools.map((tool) => ({
      toolSpec: {
        name: tool.function.name,
        ...(tool.function.description !== undefined && { description: tool.function.description }),
        inputSchema: { json: (tool.function.parameters ?? { type: 'object', properties: {} }) as never },
      },
    }));
    const toolChoice = toolChoiceOf(call.toolChoice);
    input.toolConfig = { tools, ...(toolChoice && { toolChoice }) };
  }
  return input;
}

/** Converse's stopReason as the port's finish reason. */
export function finishReasonOf(stopReason: unknown, sawToolCalls: boolean): FinishReason {
  if (stopReason === 'max_tokens' || stopReason === 'model_context_window_exceeded') return 'length';
  if (stopReason === 'tool_use') return 'tool_calls';
  return sawToolCalls ? 'tool_calls' : 'stop';
}

/** A tool use block as a tool call. */
export function toolCallOf(id: string | undefined, name: string, input: string): ToolCall {
  return { id: id || `call_${name}`, type: 'function', function: { name, arguments: input } };
}

/** A Converse reply as a chat outcome: text blocks joined (reasoning left out), tool uses as tool calls. */
export function chatOutcomeOf(response: ConverseResponse, op: string): ChatOutcome {
  // Usage first: a reply without it is refused before anything is made of it.
  const usage = usageOf(response.usage, op);
  const blocks = response.output?.message?.content;
  if (!Array.isArray(blocks)) throw new UpstreamError(`upstream ${op} returned no message content`);
  let content = '';
  const toolCalls: ToolCall[] = [];
  for (const block of blocks) {
    if (typeof block.text === 'string') content += block.text;
    else if (block.toolUse?.name) toolCalls.push(toolCallOf(block.toolUse.toolUseId, block.toolUse.name, JSON.stringify(block.toolUse.input ?? {})));
  }
  return { content, toolCalls, finishReason: finishReasonOf(response.stopReason, toolCalls.length > 0), usage };
}
