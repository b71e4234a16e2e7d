// chat / chatStream through the official Bedrock runtime client: the canonical call goes out as
// Converse (or ConverseStream, an AWS event stream); text, tool uses, the stop reason and the
// usage come back as the port's outcome and stream parts.
import { ConverseCommand, ConverseStreamCommand, type BedrockRuntimeClient } from '@aws-sdk/client-bedrock-runtime';
import { abortedWith } from '../abort.ts';
import { UpstreamError, type ChatCall, type ChatOutcome, type ChatStreamPart, type Usage } from '../port.ts';
import { asUpstreamFailure, Deadline } from '../upstream-http.ts';
import { chatSecrets } from '../openai-chat-wire.ts';
import { chatOutcomeOf, converseInput, finishReasonOf } from './translate.ts';
import { usageOf } from './usage.ts';
import { bedrockFailureOf } from './errors.ts';

/** The client and the waits of one Bedrock provider. */
export interface BedrockTarget {
  client: BedrockRuntimeClient;
  /** The credentials given in the config, to scrub from error messages. */
  secrets: readonly string[];
  /** Longest silence between stream events. */
  timeoutMs: number;
  /** Longest wait from sending the request to the response's headers. */
  firstByteTimeoutMs: number;
}

/** The call's own abort, fired by the caller leaving or by the upstream's silence; `failure` tells them apart. */
export function watched(target: BedrockTarget, signal: AbortSignal, op: string, texts: readonly string[]) {
  const deadline = new Deadline(signal, target.firstByteTimeoutMs);
  const abort = abortedWith(signal);
  deadline.watch(() => abort.abort());
  const secrets = [...target.secrets, ...texts];
  const failure = (error: unknown): Error =>
    signal.aborted || deadline.timedOut
      ? asUpstreamFailure(error, op, signal, deadline)
      : (bedrockFailureOf(error, op, secrets) ?? asUpstreamFailure(error, op, signal, deadline));
  return { deadline, signal: abort.signal, failure };
}

export async function chat(target: BedrockTarget, call: ChatCall): Promise<ChatOutcome> {
  const op = 'chat';
  const { deadline, signal, failure } = watched(target, call.signal, op, chatSecrets(call));
  try {
    const response = await target.client.send(new ConverseCommand({ modelId: call.upstreamModel, ...converseInput(call) }), { abortSignal: signal });
    const outcome = chatOutcomeOf(response, op);
    const id = response.$metadata?.requestId;
    if (id) outcome.upstreamId = id;
    return outcome;
  } catch (error) {
    throw failure(error);
  } finally {
    deadline.clear();
  }
}

export async function* chatStream(target: BedrockTarget, call: ChatCall): AsyncGenerator<ChatStreamPart> {
  const op = 'chat stream';
  const { deadline, signal, failure } = watched(target, call.signal, op, chatSecrets(call));
  // Content block index → the tool call's index, and whether any argument text was passed on.
  const tools = new Map<number, { index: number; hasArguments: boolean }>();
  let stopReason: unknown;
  let usage: Usage | undefined;
  let upstreamId: string | undefined;
  try {
    const response = await target.client.send(new ConverseStreamCommand({ modelId: call.upstreamModel, ...converseInput(call) }), { abortSignal: signal });
    upstreamId = response.$metadata?.requestId;
    if (!response.stream) throw new UpstreamError(`upstream ${op} returned no stream`);
    deadline.touch(target.timeoutMs);
    for await (const event of response.stream) {
      // The silence timer must not run while a slow client is consuming what we yield.
      // An exception event (throttling, the model's stream error, …) is thrown by the client as its typed error.
      deadline.clear();
      const start = event.contentBlockStart;
      if (start?.start?.toolUse?.name && start.contentBlockIndex !== undefined) {
        const tool = { index: tools.size, hasArguments: false };
        tools.set(start.contentBlockIndex, tool);
        yield { type: 'tool_call', index: tool.index, id: start.start.toolUse.toolUseId ?? `call_${tool.index}`, name: start.start.toolUse.name };
      }
      const delta = event.contentBlockDelta;
      if (typeof delta?.delta?.text === 'string' && delta.delta.text !== '') yield { type: 'text', text: delta.delta.text };
      const input = delta?.delta?.toolUse?.input;
      const tool = delta?.contentBlockIndex !== undefined ? tools.get(delta.contentBlockIndex) : undefined;
      if (tool && typeof input === 'string' && input !== '') {
        tool.hasArguments = true;
        yield { type: 'tool_call', index: tool.index, arguments: input };
      }
      const stopped = event.contentBlockStop?.contentBlockIndex;
      const stoppedTool = stopped !== undefined ? tools.get(stopped) : undefined;
      // A tool called without arguments still has an (empty) object of them.
      if (stoppedTool && !stoppedTool.hasArguments) yield { type: 'tool_call', index: stoppedTool.index, arguments: '{}' };
      if (event.messageStop) stopReason = event.messageStop.stopReason;
      if (event.metadata) usage = usageOf(event.metadata.usage, op);
      deadline.touch(target.timeoutMs);
    }
  } catch (error) {
    throw failure(error);
  } finally {
    deadline.clear();
  }
  // messageStop then metadata end every stream: one that ends without them was cut.
  if (stopReason === undefined) throw new UpstreamError(`upstream ${op} ended before its stop reason`);
  if (!usage) throw new UpstreamError(`upstream ${op} ended without usage`);
  const finish: ChatStreamPart = { type: 'finish', finishReason: finishReasonOf(stopReason, tools.size > 0), usage };
  if (upstreamId) finish.upstreamId = upstreamId;
  yield finish;
}
