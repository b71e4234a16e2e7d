// Libraries that only one test each needs, loaded from test/tools (installed there on first use
// from its own lock file), with the few types those tests use.
import { fileURLToPath } from 'node:url';
import { loadFromFolder, type FirstUseFolder } from './first-use-install.ts';

const TEST_TOOLS: FirstUseFolder = {
  dir: fileURLToPath(new URL('../tools', import.meta.url)),
  label: 'the test tools (js-tiktoken, yaml, @anthropic-ai/vertex-sdk)',
};

/** js-tiktoken's encoder: OpenAI's tiktoken ported, the reference for the gateway's counts. */
export interface ReferenceEncoder {
  /** The special tokens allowed and refused in the text ([] and []: none is special). */
  encode(text: string, allowedSpecial?: string[], disallowedSpecial?: string[]): number[];
  decode(tokens: number[]): string;
}

/** js-tiktoken's o200k_base encoder (test/upstream-tokenizer.test.ts). */
export async function referenceO200k(): Promise<ReferenceEncoder> {
  const { Tiktoken } = await loadFromFolder<{ Tiktoken: new (ranks: unknown) => ReferenceEncoder }>(TEST_TOOLS, 'js-tiktoken/lite');
  const ranks = await loadFromFolder<unknown>(TEST_TOOLS, 'js-tiktoken/ranks/o200k_base');
  return new Tiktoken(ranks);
}

/** The yaml library's parse (test/compose.test.ts). */
export async function parseYaml(text: string): Promise<unknown> {
  const { parse } = await loadFromFolder<{ parse(text: string): unknown }>(TEST_TOOLS, 'yaml');
  return parse(text);
}

/** The Messages calls of @anthropic-ai/vertex-sdk's client that test/upstream-vertex.test.ts makes. */
export interface VertexClaudeClient {
  messages: {
    create(body: Record<string, unknown>): Promise<{ type: string; usage: { input_tokens: number } }>;
    countTokens(body: Record<string, unknown>): Promise<{ input_tokens: number }>;
  };
}

/** @anthropic-ai/vertex-sdk's AnthropicVertex, Anthropic's official Vertex client (test/upstream-vertex.test.ts). */
export async function anthropicVertex(options: Record<string, unknown>): Promise<VertexClaudeClient> {
  const { AnthropicVertex } = await loadFromFolder<{ AnthropicVertex: new (options: Record<string, unknown>) => VertexClaudeClient }>(
    TEST_TOOLS,
    '@anthropic-ai/vertex-sdk',
  );
  return new AnthropicVertex(options);
}
