// Where a Messages request goes and how it is authorized: Anthropic's own API (POST /v1/messages
// with the key in x-api-key), or a platform that serves Anthropic's models under its own paths and
// credentials (Vertex AI's rawPredict with a Google bearer token). The adapter's translation,
// pass-through, streaming and usage are the same for both.
import { send, type SendOptions, type UpstreamResponse, type Deadline, type UpstreamTarget } from '../upstream-http.ts';
import { jsonBytes } from '../json-slices.ts';
import type { Json } from './json.ts';

export type MessagesRequestKind = 'messages' | 'count_tokens';

export interface MessagesEndpoint {
  readonly target: UpstreamTarget;
  /** The path of a request, and its body as this upstream takes it (the body's `model` is set; `stream` says which reply). */
  route(kind: MessagesRequestKind, body: Json): { path: string; body: Json };
  /** Headers that authorize one request (none when the target's own headers do; a fresh bearer token on a platform). */
  authorize(): Promise<Record<string, string>>;
}

export const MESSAGES_PATH = '/v1/messages';
export const COUNT_TOKENS_PATH = '/v1/messages/count_tokens';

/** Anthropic's API: its paths, the body as it is, the key and version in the target's headers. */
export function anthropicApi(target: UpstreamTarget): MessagesEndpoint {
  return {
    target,
    route: (kind, body) => ({ path: kind === 'messages' ? MESSAGES_PATH : COUNT_TOKENS_PATH, body }),
    authorize: async () => ({}),
  };
}

/** Sends a Messages (or count_tokens) request to the endpoint: routed, authorized, the credentials kept out of errors. */
export async function sendMessages(
  endpoint: MessagesEndpoint,
  kind: MessagesRequestKind,
  body: Json,
  options: Omit<SendOptions, 'path' | 'body'>,
): Promise<{ response: UpstreamResponse; deadline: Deadline }> {
  const routed = endpoint.route(kind, body);
  const auth = await endpoint.authorize();
  return send(endpoint.target, {
    ...options,
    path: routed.path,
    body: await jsonBytes(routed.body),
    secrets: [...options.secrets, ...Object.values(auth)],
    headers: { ...options.headers, ...auth },
  });
}
