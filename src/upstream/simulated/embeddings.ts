// The simulated upstream's embeddings: a unit vector per input, the same for the same model and
// input (seeded by both), and the input's tokens counted as the gateway counts them.
import type { EmbedCall, EmbedOutcome } from '../port.ts';
import { createRng, seedFrom } from '../seed.ts';
import { countEmbeddingTokensYielding } from '../tokenizer.ts';
import { base64Of } from '../embedding-vector.ts';

/** Dimensions when the caller names none (OpenAI's small model gives 1,536; a double needs fewer). */
export const SIMULATED_EMBEDDING_DIMENSIONS = 256;

function vectorOf(model: string, item: string, dimensions: number): Float32Array {
  const random = createRng(seedFrom('embedding', model, item));
  const v = new Float32Array(dimensions);
  let norm = 0;
  for (let i = 0; i < dimensions; i++) {
    v[i] = random() * 2 - 1;
    norm += v[i] * v[i];
  }
  const scale = 1 / Math.sqrt(norm || 1);
  for (let i = 0; i < dimensions; i++) v[i] *= scale;
  return v;
}

export async function simulatedEmbeddings(call: EmbedCall): Promise<EmbedOutcome> {
  const items =
    typeof call.input === 'string' ? [call.input] : typeof call.input[0] === 'number' ? [call.input as number[]] : (call.input as Array<string | number[]>);
  const dimensions = call.dimensions ?? SIMULATED_EMBEDDING_DIMENSIONS;
  const vectors = items.map((item) => {
    const v = vectorOf(call.upstreamModel, typeof item === 'string' ? item : item.join(','), dimensions);
    return call.encodingFormat === 'base64' ? base64Of(v) : Array.from(v);
  });
  return { vectors, promptTokens: await countEmbeddingTokensYielding(call.input) };
}
