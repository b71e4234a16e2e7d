// Anthropic's models on Vertex AI: a Messages request goes to
// /v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:rawPredict
// (streamRawPredict when streamed) without its `model` field and with Vertex's
// `anthropic_version` in the body; count_tokens to .../models/count-tokens:rawPredict with the
// model kept. Each request carries a Google bearer token (refreshed by google-auth-library).
import type { GoogleAuth } from 'google-auth-library';
import type { UpstreamTarget } from '../upstream-http.ts';
import type { MessagesEndpoint } from '../anthropic/endpoint.ts';
import { authorizationHeaders } from './auth.ts';

/** The API version Vertex serves Anthropic's Messages under. */
export const VERTEX_ANTHROPIC_VERSION = 'vertex-2023-10-16';

export interface VertexMessagesOptions {
  project: string;
  location: string;
  auth: GoogleAuth;
  target: UpstreamTarget;
}

/** A path segment percent-encoded where RFC 3986 requires it only: model versions keep their `@`. */
const segment = (value: string): string => value.replace(/[^\w\-.~!$&'()*+,;=:@]+/g, encodeURIComponent);

export function vertexMessagesEndpoint({ project, location, auth, target }: VertexMessagesOptions): MessagesEndpoint {
  const models = `/v1/projects/${segment(project)}/locations/${segment(location)}/publishers/anthropic/models`;
  return {
    target,
    route(kind, body) {
      if (kind === 'count_tokens') return { path: `${models}/count-tokens:rawPredict`, body: { ...body, anthropic_version: VERTEX_ANTHROPIC_VERSION } };
      const { model, ...rest } = body;
      const method = rest.stream === true ? 'streamRawPredict' : 'rawPredict';
      return { path: `${models}/${segment(String(model))}:${method}`, body: { ...rest, anthropic_version: VERTEX_ANTHROPIC_VERSION } };
    },
    authorize: () => authorizationHeaders(auth, 'messages'),
  };
}
