// The default, fully offline upstream: deterministic chat and real JPEG images.
import type { ChatCall, ChatOutcome, ChatStreamPart, EmbedCall, ImageCall, ImageOutcome, Provider } from '../port.ts';
import { simulatedEmbeddings } from './embeddings.ts';
import { pause, throwIfAborted } from '../abort.ts';
import { planReply } from './text.ts';
import { drawImage, editImage } from './image.ts';
import { countMessageTokensYielding } from '../tokenizer.ts';

export { InvalidImageError } from '../image-error.ts';

export interface SimulatedOptions {
  /** Pause per generated token; a non-streamed reply waits the sum. Default 0. */
  tokenDelayMs?: number;
  /** Pause before an image is produced. Default 0. */
  imageDelayMs?: number;
}

export function createSimulatedProvider(options: SimulatedOptions = {}): Provider {
  const tokenDelayMs = options.tokenDelayMs ?? 0;
  const imageDelayMs = options.imageDelayMs ?? 0;

  async function chat(call: ChatCall): Promise<ChatOutcome> {
    throwIfAborted(call.signal);
    const plan = planReply(call);
    const usage = { prompt_tokens: await countMessageTokensYielding(call.messages, call.tools), completion_tokens: plan.completionTokens };
    await pause(tokenDelayMs * plan.completionTokens, call.signal);
    return { content: plan.content, toolCalls: plan.toolCall ? [plan.toolCall] : [], finishReason: plan.finishReason, usage };
  }

  async function* chatStream(call: ChatCall): AsyncGenerator<ChatStreamPart> {
    throwIfAborted(call.signal);
    const plan = planReply(call);
    const usage = { prompt_tokens: await countMessageTokensYielding(call.messages, call.tools), completion_tokens: plan.completionTokens };
    const tool = plan.toolCall;
    if (tool) yield { type: 'tool_call', index: 0, id: tool.id, name: tool.function.name, arguments: '' };
    for (const piece of plan.pieces) {
      await pause(tokenDelayMs, call.signal);
      yield tool ? { type: 'tool_call', index: 0, arguments: piece } : { type: 'text', text: piece };
    }
    throwIfAborted(call.signal);
    yield { type: 'finish', finishReason: plan.finishReason, usage };
  }

  async function image(call: ImageCall): Promise<ImageOutcome> {
    await pause(imageDelayMs, call.signal);
    const jpeg = call.source
      ? await editImage(call.source.bytes, call.prompt, call.upstreamModel, call.size)
      : await drawImage(call.prompt, call.upstreamModel, call.size);
    throwIfAborted(call.signal);
    return { jpeg };
  }

  // No pause: an embedding takes the upstream milliseconds, and nothing streams.
  const embed = async (call: EmbedCall) => {
    throwIfAborted(call.signal);
    return simulatedEmbeddings(call);
  };

  return { name: 'simulated', chat, chatStream, image, embed };
}
