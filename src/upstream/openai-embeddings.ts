// POST /embeddings on an upstream that speaks OpenAI's wire format (OpenAI, any compatible
// server): the caller's input and options as they are, the vectors in input order, and the input
// tokens the upstream counted. A reply without them is malformed: nothing is charged for it.
import { UpstreamError, type EmbedCall, type EmbedOutcome } from './port.ts';
import { readJson, send, type UpstreamTarget } from './upstream-http.ts';
import { jsonBytes } from './json-slices.ts';

const textsOf = (input: EmbedCall['input']): string[] => (typeof input === 'string' ? [input] : input.filter((v): v is string => typeof v === 'string'));

export async function embedOverOpenAIWire(target: UpstreamTarget, call: EmbedCall, path = '/embeddings'): Promise<EmbedOutcome> {
  const body: Record<string, unknown> = { model: call.upstreamModel, input: call.input, encoding_format: call.encodingFormat };
  if (call.dimensions !== undefined) body.dimensions = call.dimensions;
  if (call.user !== undefined) body.user = call.user;
  const { response, deadline } = await send(target, {
    op: 'embeddings',
    path,
    body: await jsonBytes(body),
    signal: call.signal,
    secrets: textsOf(call.input),
  });
  return embeddingsOf(await readJson(response, 'embeddings', call.signal, deadline), call);
}

/** The vectors (by their `index`) and the prompt tokens of an OpenAI embeddings reply. */
export function embeddingsOf(reply: unknown, call: Pick<EmbedCall, 'encodingFormat' | 'input'>): EmbedOutcome {
  const r = reply as { data?: unknown; usage?: { prompt_tokens?: unknown } } | null;
  const expected = typeof call.input === 'string' || typeof call.input[0] === 'number' ? 1 : call.input.length;
  if (!r || !Array.isArray(r.data) || r.data.length !== expected) throw new UpstreamError('upstream embeddings reply is malformed (its data)');
  const tokens = r.usage?.prompt_tokens;
  if (typeof tokens !== 'number' || !Number.isSafeInteger(tokens) || tokens < 0) throw new UpstreamError('upstream embeddings reply is malformed (no usage)');
  const vectors: Array<number[] | string> = new Array(expected);
  for (const item of r.data as Array<{ index?: unknown; embedding?: unknown }>) {
    const at = item?.index;
    const v = item?.embedding;
    const fits = call.encodingFormat === 'base64' ? typeof v === 'string' : Array.isArray(v) && v.every((x) => typeof x === 'number');
    if (typeof at !== 'number' || !Number.isInteger(at) || at < 0 || at >= expected || vectors[at] !== undefined || !fits)
      throw new UpstreamError('upstream embeddings reply is malformed (a vector)');
    vectors[at] = v as number[] | string;
  }
  return { vectors, promptTokens: tokens };
}
