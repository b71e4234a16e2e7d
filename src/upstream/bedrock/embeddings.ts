// Embeddings on Bedrock through InvokeModel with Amazon's Titan text embeddings models
// (amazon.titan-embed-text-v2): one text per request, so a list is embedded text by text, in
// parallel, in input order; each reply counts its own input tokens (inputTextTokenCount), and
// their sum is charged. Other Bedrock embedding models have other bodies and are not spoken here.
import { InvokeModelCommand } from '@aws-sdk/client-bedrock-runtime';
import { UpstreamError, type EmbedCall, type EmbedOutcome } from '../port.ts';
import { base64Of } from '../embedding-vector.ts';
import { watched, type BedrockTarget } from './chat.ts';

const TITAN = /(^|\.)amazon\.titan-embed-text-v2/;

function textsOf(input: EmbedCall['input']): string[] {
  if (typeof input === 'string') return [input];
  if (input.every((item): item is string => typeof item === 'string')) return input;
  throw new UpstreamError('bedrock upstreams embed text only, not token ids', 400, 'request');
}

interface TitanReply {
  embedding?: unknown;
  inputTextTokenCount?: unknown;
}

export async function embed(target: BedrockTarget, call: EmbedCall): Promise<EmbedOutcome> {
  const op = 'embeddings';
  if (!TITAN.test(call.upstreamModel)) throw new UpstreamError(`bedrock embeddings are made by amazon.titan-embed-text-v2 models only`, undefined, 'config');
  const texts = textsOf(call.input);
  const { deadline, signal, failure } = watched(target, call.signal, op, texts);
  const one = async (inputText: string): Promise<{ vector: number[]; tokens: number }> => {
    const body = JSON.stringify({ inputText, normalize: true, ...(call.dimensions !== undefined && { dimensions: call.dimensions }) });
    const reply = await target.client.send(
      new InvokeModelCommand({ modelId: call.upstreamModel, contentType: 'application/json', accept: 'application/json', body }),
      { abortSignal: signal },
    );
    let parsed: TitanReply;
    try {
      parsed = JSON.parse(Buffer.from(reply.body).toString('utf8')) as TitanReply;
    } catch {
      throw new UpstreamError('upstream embeddings reply is malformed (not JSON)');
    }
    const vector = parsed.embedding;
    const tokens = parsed.inputTextTokenCount;
    if (!Array.isArray(vector) || !vector.every((x) => typeof x === 'number')) throw new UpstreamError('upstream embeddings reply is malformed (a vector)');
    if (typeof tokens !== 'number' || !Number.isSafeInteger(tokens) || tokens < 0)
      throw new UpstreamError('upstream embeddings reply is malformed (no token count)');
    return { vector, tokens };
  };
  try {
    const made = await Promise.all(texts.map(one));
    return {
      vectors: made.map(({ vector }) => (call.encodingFormat === 'base64' ? base64Of(vector) : vector)),
      promptTokens: made.reduce((sum, { tokens }) => sum + tokens, 0),
    };
  } catch (error) {
    throw failure(error);
  } finally {
    deadline.clear();
  }
}
