// Embeddings through the @google/genai client (batchEmbedContents on the Gemini API; on Vertex AI
// :predict or :embedContent, one text a request): texts in, one vector per text in input order.
// The Gemini API reports no token count for embeddings, so the input is charged as the gateway
// counts it (the count its hold was made with); Vertex AI counts each text's tokens, and those
// counts are charged.
import type { ContentEmbedding } from '@google/genai';
import { UpstreamError, type EmbedCall, type EmbedOutcome } from '../port.ts';
import { countEmbeddingTokensYielding } from '../tokenizer.ts';
import { base64Of } from '../embedding-vector.ts';
import { watched, type GeminiTarget } from './chat.ts';

function textsOf(input: EmbedCall['input']): string[] {
  if (typeof input === 'string') return [input];
  if (input.every((item): item is string => typeof item === 'string')) return input;
  throw new UpstreamError('gemini upstreams embed text only, not token ids', 400, 'request');
}

export async function embed(target: GeminiTarget, call: EmbedCall): Promise<EmbedOutcome> {
  const op = 'embeddings';
  const texts = textsOf(call.input);
  const { deadline, signal, failure } = watched(target, call.signal, op, texts);
  const config = { abortSignal: signal, ...(call.dimensions !== undefined && { outputDimensionality: call.dimensions }) };
  const ask = async (contents: string[]) => (await target.client.models.embedContent({ model: call.upstreamModel, contents, config })).embeddings ?? [];
  let embeddings: ContentEmbedding[];
  try {
    // Vertex's newer embedding models take one text a request (and each answer counts its own tokens).
    embeddings = target.embedOneByOne ? (await Promise.all(texts.map((text) => ask([text])))).flat() : await ask(texts);
  } catch (error) {
    throw failure(error);
  } finally {
    deadline.clear();
  }
  if (embeddings.length !== texts.length) throw new UpstreamError('upstream embeddings reply is malformed (its embeddings)');
  const vectors = embeddings.map((e) => {
    const values = e.values;
    if (!Array.isArray(values) || !values.every((x) => typeof x === 'number')) throw new UpstreamError('upstream embeddings reply is malformed (a vector)');
    return call.encodingFormat === 'base64' ? base64Of(values) : values;
  });
  const counted = embeddings.map((e) => e.statistics?.tokenCount);
  const upstreamCount = counted.every((n): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0);
  const promptTokens = upstreamCount ? counted.reduce((a, b) => a + b, 0) : await countEmbeddingTokensYielding(texts);
  return { vectors, promptTokens };
}
