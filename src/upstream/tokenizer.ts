// Real token counts (o200k_base, from gpt-tokenizer) for quota holds, simulated usage and
// counting what was already streamed when a client goes away. gpt-tokenizer keeps o200k in about
// a third of js-tiktoken's heap and encodes several times faster (measured for #8).
import { encode, decode } from 'gpt-tokenizer/encoding/o200k_base';
import type { ChatMessage, ToolDefinition } from './port.ts';
import { nextTurn } from '../next-turn.ts';

/** OpenAI bills a high-detail 1024x1024 image part at 85 + 4 * 170 tokens. */
export const IMAGE_PART_TOKENS = 765;
// OpenAI's published chat accounting: every message is wrapped in a few framing tokens and the
// reply is primed with a few more.
const TOKENS_PER_MESSAGE = 3;
const TOKENS_PER_NAME = 1;
const REPLY_PRIMING = 3;
const TOKENS_PER_TOOL_CALL = 3;
const TOOLS_PREAMBLE = 7;
const TOKENS_PER_TOOL = 3;

// Byte-pair merge is quadratic in the length of one regex piece (4,000 repeated
// letters take ~0.8 s), so a hostile prompt could stall the event loop. Text with no long run
// takes the exact path; otherwise pieces longer than MAX_PIECE are encoded in chunks, which
// keeps the cost linear and decode(encode(x)) === x, at the price of exactness on those pieces.
const LONG_RUN = /[\p{L}\p{M}]{32}|[^\s\p{L}\p{N}]{32}|\s{32}/u;
const MAX_PIECE = 40;
const CHUNK_CODE_POINTS = 32;

/** Special-token text such as <|endoftext|> in a prompt is plain text, never a control token. */
const PLAIN = { disallowedSpecial: new Set<string>() };
const enc = { encode: (text: string): number[] => encode(text, PLAIN), decode: (tokens: number[]): string => decode(tokens) };

/** The pattern that splits text into the pieces byte-pair merging works on (o200k_base's). */
const O200K_PIECES =
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
let piecePattern: RegExp | undefined;

/** Loads the ranks once (a few hundred ms); call at startup to keep it off a request. */
export function warmTokenizer(): void {
  enc.encode('warm');
}

function pieces(): RegExp {
  piecePattern ??= new RegExp(O200K_PIECES, 'gu');
  return piecePattern;
}

function appendAll(target: number[], tokens: number[]): void {
  // A loop, not push(...tokens): spreading a huge array overflows the stack.
  for (const token of tokens) target.push(token);
}

/** Token ids of `text`. Special-token text such as <|endoftext|> is treated as plain text. */
export function encodeText(text: string): number[] {
  if (!LONG_RUN.test(text)) return enc.encode(text);
  const out: number[] = [];
  const chunkMemo = new Map<string, number[]>();
  let segmentStart = 0;
  for (const match of text.matchAll(pieces())) {
    if (match[0].length <= MAX_PIECE) continue;
    if (match.index > segmentStart) appendAll(out, enc.encode(text.slice(segmentStart, match.index)));
    const codePoints = Array.from(match[0]);
    for (let i = 0; i < codePoints.length; i += CHUNK_CODE_POINTS) {
      const chunk = codePoints.slice(i, i + CHUNK_CODE_POINTS).join('');
      let tokens = chunkMemo.get(chunk);
      if (!tokens) {
        tokens = enc.encode(chunk);
        chunkMemo.set(chunk, tokens);
      }
      appendAll(out, tokens);
    }
    segmentStart = match.index + match[0].length;
  }
  if (segmentStart < text.length) appendAll(out, enc.encode(text.slice(segmentStart)));
  return out;
}

export function decodeTokens(tokens: number[]): string {
  return enc.decode(tokens);
}

export function countTextTokens(text: string): number {
  return text.length === 0 ? 0 : encodeText(text).length;
}

/**
 * Splits `text` into its tokens as strings, one per token, except that tokens which only
 * together form a character (multi-byte UTF-8 split by the encoder) share one piece.
 * Concatenating the pieces gives back `text`.
 */
export function tokenPieces(text: string): { text: string; tokens: number }[] {
  const tokens = encodeText(text);
  const out: { text: string; tokens: number }[] = [];
  let pending: number[] = [];
  let position = 0;
  for (const token of tokens) {
    pending.push(token);
    const candidate = decodeTokens(pending);
    if (text.startsWith(candidate, position)) {
      out.push({ text: candidate, tokens: pending.length });
      position += candidate.length;
      pending = [];
    }
  }
  if (pending.length > 0) out.push({ text: decodeTokens(pending), tokens: pending.length });
  return out;
}

/**
 * What a chat request's prompt is counted from, following OpenAI's documented per-message
 * accounting: texts to tokenize, and numbers of tokens that are fixed (framing, image parts).
 */
function* promptParts(messages: ChatMessage[], tools?: ToolDefinition[]): Generator<string | number> {
  yield REPLY_PRIMING;
  for (const message of messages) {
    yield TOKENS_PER_MESSAGE;
    yield message.role;
    const content = message.content;
    if (typeof content === 'string') yield content;
    else for (const part of content ?? []) yield part.type === 'text' ? part.text : IMAGE_PART_TOKENS;
    if (message.name) {
      yield TOKENS_PER_NAME;
      yield message.name;
    }
    for (const call of message.tool_calls ?? []) {
      yield TOKENS_PER_TOOL_CALL;
      yield call.function.name;
      yield call.function.arguments;
    }
  }
  if (tools && tools.length > 0) {
    // OpenAI renders tools in its own compact form; the JSON schema is a close upper estimate.
    yield TOOLS_PREAMBLE;
    for (const tool of tools) {
      yield TOKENS_PER_TOOL;
      yield JSON.stringify(tool.function);
    }
  }
}

/** Prompt tokens of a chat request, at once (for prompts known to be small). */
export function countMessageTokens(messages: ChatMessage[], tools?: ToolDefinition[]): number {
  let total = 0;
  for (const part of promptParts(messages, tools)) total += typeof part === 'number' ? part : countTextTokens(part);
  return total;
}

// Counting runs at roughly 6 MB/s of English and 1.5 MB/s of CJK text: a request's prompt (up
// to the body limit) would hold the event loop for seconds. It is counted in slices of about
// SLICE characters, yielding to other requests between them (about 3-10 ms each).
const SLICE = 16_384;
/** A cut that starts a piece in o200k's split (a space between two letters), so slices count as the whole does. */
const PIECE_START = /(?<=\p{L}) (?=\p{L})/gu;

/** Where to end the slice that starts at `from`: the first piece start past SLICE characters, else SLICE characters on. */
function sliceEnd(text: string, from: number): number {
  const target = from + SLICE;
  if (target >= text.length) return text.length;
  PIECE_START.lastIndex = target;
  const m = PIECE_START.exec(text);
  if (m && m.index < target + SLICE) return m.index;
  // No space between letters near (CJK, base64): cut anyway, off by a token at most, never inside a surrogate pair.
  const code = text.charCodeAt(target - 1);
  return code >= 0xd800 && code <= 0xdbff ? target + 1 : target;
}

/**
 * Prompt tokens of a chat request, as countMessageTokens (exactly, where the text has spaces
 * between words), yielding the event loop after every SLICE characters counted.
 */
export async function countMessageTokensYielding(messages: ChatMessage[], tools?: ToolDefinition[]): Promise<number> {
  return countPartsYielding(promptParts(messages, tools));
}

/** Counts each text part in slices (a number part is a count already), yielding between slices. */
async function countPartsYielding(parts: Iterable<string | number>): Promise<number> {
  let total = 0;
  let sinceYield = 0;
  for (const part of parts) {
    if (typeof part === 'number') {
      total += part;
      continue;
    }
    for (let from = 0; from < part.length;) {
      const end = sliceEnd(part, from);
      total += countTextTokens(part.slice(from, end));
      sinceYield += end - from;
      from = end;
      if (sinceYield >= SLICE) {
        sinceYield = 0;
        await nextTurn();
      }
    }
  }
  return total;
}

/** The tokens of an embeddings input: each text counted in slices, as a prompt is; each list of token ids by its length. */
export function countEmbeddingTokensYielding(input: string | string[] | number[] | number[][]): Promise<number> {
  if (typeof input === 'string') return countPartsYielding([input]);
  const items: Array<string | number[]> = input.length > 0 && typeof input[0] === 'number' ? [input as number[]] : (input as Array<string | number[]>);
  return countPartsYielding(items.map((item) => (typeof item === 'string' ? item : item.length)));
}
