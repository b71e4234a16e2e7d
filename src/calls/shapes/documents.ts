// The JSON Schema documents written from the shapes: schemas/requests/<name>.json (read by
// src/http/validate.ts at start-up) and schemas/responses/<name>.json (what the /v1 replies are).
// `npm run schemas` writes them (tools/schemas/), and its --check runs in CI.
import {
  ANTHROPIC_DEFINITIONS,
  ChatCompletionsRequest,
  EmbeddingsRequest,
  ImageUrl,
  ImagesRequest,
  MessagesCountTokensRequest,
  MessagesRequest,
  ResponsesRequest,
} from './request-shapes.ts';
import { RESPONSE_SHAPES } from './response-shapes.ts';
import type { SchemaDocument } from './shape-parts.ts';

const DRAFT_07 = 'http://json-schema.org/draft-07/schema#';

/** The request bodies, by the name validate.ts knows them by. */
const REQUESTS: Record<string, SchemaDocument> = {
  'chat-completions': { title: 'CreateChatCompletion', shape: ChatCompletionsRequest, definitions: { imageUrl: ImageUrl } },
  embeddings: {
    title: 'CreateEmbedding',
    description: 'Body of /v1/embeddings: text or token ids, one input or up to 2,048.',
    shape: EmbeddingsRequest,
  },
  images: {
    title: 'CreateImage',
    description: 'Body of /v1/images/generations and /v1/images/edits (JSON, or multipart for edits).',
    shape: ImagesRequest,
  },
  'messages-count-tokens': {
    title: 'CountMessageTokens (Anthropic Messages API)',
    description: 'The body of a /v1/messages call without max_tokens; extra fields are ignored.',
    shape: MessagesCountTokensRequest,
    definitions: ANTHROPIC_DEFINITIONS,
  },
  messages: {
    title: 'CreateMessage (Anthropic Messages API)',
    description:
      'Lenient on purpose: clients such as Claude Code send fields this gateway ignores (metadata, thinking, cache_control, context_management, ...).',
    shape: MessagesRequest,
    definitions: ANTHROPIC_DEFINITIONS,
  },
  responses: {
    title: 'CreateResponse (OpenAI Responses API)',
    description:
      'Lenient on purpose: clients such as Codex CLI send fields this gateway ignores (include, store, prompt_cache_key, hosted tools, reasoning items, ...).',
    shape: ResponsesRequest,
  },
};

/** JSON round trip: the plain schema, without TypeBox's own (symbol) marks. */
const plain = (schema: object) => JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;

function documentsOf(kind: 'requests' | 'responses', entries: Record<string, SchemaDocument>): Record<string, object> {
  const documents: Record<string, object> = {};
  for (const [name, { title, description, shape, definitions }] of Object.entries(entries)) {
    documents[name] = {
      $schema: DRAFT_07,
      $id: `tollgate/${kind}/${name}`,
      title,
      ...(description ? { description } : {}),
      ...plain(shape),
      ...(definitions ? { definitions: plain(definitions) } : {}),
    };
  }
  return documents;
}

/** schemas/requests/<name>.json, by name. */
export const requestSchemaDocuments = (): Record<string, object> => documentsOf('requests', REQUESTS);

/** schemas/responses/<name>.json, by name. */
export const responseSchemaDocuments = (): Record<string, object> => documentsOf('responses', RESPONSE_SHAPES);
