// The native Azure OpenAI provider, through the official `openai` package's AzureOpenAI client:
// chat completions on a deployment of an Azure OpenAI resource, authenticated by its `api-key`
// and pinned to one `api-version`. Canonical calls go out as chat completions with usage read in
// full; callers of every dialect (chat completions, Messages, Responses) are translated to them.
import { AzureOpenAI } from 'openai';
import { UpstreamError, type ChatCall, type ImageOutcome, type Provider } from '../port.ts';
import { chat, chatStream, type AzureTarget } from './chat.ts';

export { CONTENT_FILTER_CODE } from './errors.ts';

export interface AzureOpenAIOptions {
  /** The resource's endpoint, e.g. https://my-resource.openai.azure.com (the client appends /openai). */
  endpoint: string;
  apiKey: string;
  /** The `api-version` query parameter every request carries, e.g. 2024-10-21. */
  apiVersion: string;
  /** One deployment for every call; without it each channel's upstream model names its deployment. */
  deployment?: string;
  /** Longest silence accepted between stream events. */
  timeoutMs?: number;
  /** Longest wait from sending the request to the response's headers; default timeoutMs. */
  firstByteTimeoutMs?: number;
}

// The client's own default: reasoning deployments think for minutes.
const DEFAULT_TIMEOUT_MS = 600_000;

/** https://{resource}.openai.azure.com for a resource name. */
export const azureEndpointOf = (resource: string): string => `https://${resource}.openai.azure.com`;

/**
 * The client: the key goes in the `api-key` header, `api-version` on every URL, the deployment in
 * the path. The base URL is given whole (the endpoint + /openai) so the client's environment
 * defaults (OPENAI_BASE_URL, AZURE_OPENAI_ENDPOINT, OPENAI_ORG_ID) never reach the gateway's
 * calls; the gateway's failover does the retrying and the client logs nothing.
 */
export function azureClient(options: AzureOpenAIOptions): AzureOpenAI {
  return new AzureOpenAI({
    baseURL: `${options.endpoint.replace(/\/+$/, '')}/openai`,
    apiKey: options.apiKey,
    apiVersion: options.apiVersion,
    deployment: options.deployment,
    organization: null,
    project: null,
    maxRetries: 0,
    timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    logLevel: 'off',
  });
}

export function createAzureOpenAIProvider(options: AzureOpenAIOptions): Provider {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const target: AzureTarget = {
    client: azureClient(options),
    apiKey: options.apiKey,
    timeoutMs,
    firstByteTimeoutMs: options.firstByteTimeoutMs ?? timeoutMs,
  };
  return {
    name: 'azure-openai',
    images: false,
    chat: (call: ChatCall) => chat(target, call),
    chatStream: (call: ChatCall) => chatStream(target, call),
    image: (): Promise<ImageOutcome> => Promise.reject(new UpstreamError('azure-openai upstreams make no images here', undefined, 'config')),
  };
}
