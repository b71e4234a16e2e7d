// Loads the models config (ajv-validated), builds one provider per entry and each model's
// channels. Everything that can be wrong with it (an unknown provider, an upstream key variable
// that is not set) is reported at start, naming the model and the variable, never at a call.
import { readFileSync } from 'node:fs';
import { createAjv } from '../ajv.ts';
import type { Provider } from '../upstream/port.ts';
import { createSimulatedProvider } from '../upstream/simulated/index.ts';
import { createOpenAICompatibleProvider } from '../upstream/openai-compatible/index.ts';
import { createAnthropicProvider } from '../upstream/anthropic/index.ts';
import { createOpenAIProvider } from '../upstream/openai/index.ts';
import { azureEndpointOf, createAzureOpenAIProvider } from '../upstream/azure-openai/index.ts';
import { createGeminiProvider } from '../upstream/gemini/index.ts';
import { createBedrockProvider } from '../upstream/bedrock/index.ts';
import { createVertexAnthropicProvider, createVertexGeminiProvider } from '../upstream/vertex/index.ts';
import { parseCredentials } from '../upstream/vertex/auth.ts';
import { ChannelRegistry, type Channel } from '../upstream/channels/registry.ts';
import { DEFAULT_BREAKER_POLICY } from '../upstream/channels/breaker.ts';

interface Timeouts {
  timeoutMs?: number;
  connectTimeoutMs?: number;
  firstByteTimeoutMs?: number;
}

type ProviderConfig =
  | { type: 'simulated'; tokenDelayMs?: number; imageDelayMs?: number }
  | ({ type: 'openai-compatible'; baseURL: string; apiKeyEnv?: string } & Timeouts)
  | ({ type: 'anthropic'; baseURL?: string; apiKeyEnv: string; version?: string; structuredOutputModels?: string[] } & Timeouts)
  | ({ type: 'openai'; baseURL?: string; apiKeyEnv: string; organizationEnv?: string; projectEnv?: string } & Timeouts)
  | ({ type: 'azure-openai'; endpoint?: string; resource?: string; deployment?: string; apiVersion: string; apiKeyEnv: string } & Omit<
      Timeouts,
      'connectTimeoutMs'
    >)
  | ({ type: 'gemini'; baseURL?: string; apiVersion?: string; apiKeyEnv: string } & Omit<Timeouts, 'connectTimeoutMs'>)
  | ({
      type: 'vertex' | 'vertex-anthropic';
      project: string;
      location: string;
      credentialsEnv?: string;
      baseURL?: string;
      structuredOutputModels?: string[];
    } & Omit<Timeouts, 'connectTimeoutMs'>)
  | ({ type: 'bedrock'; region: string; endpoint?: string; accessKeyIdEnv?: string; secretAccessKeyEnv?: string; sessionTokenEnv?: string } & Omit<
      Timeouts,
      'connectTimeoutMs'
    >);

interface ChannelConfig {
  id?: string;
  provider: string;
  upstreamModel: string;
  weight?: number;
}
type ModelConfig = { provider: string; upstreamModel: string } | { channels: ChannelConfig[] };

export interface ModelsConfig {
  providers: Record<string, ProviderConfig>;
  models: Record<string, ModelConfig>;
  failover?: { failureThreshold?: number; coolDownMs?: number };
}

/** A model's way to its upstreams: its channels, tried in order (or by weight) with failover. */
export interface Route {
  channels: Channel[];
}

export interface Routes {
  byModel: Map<string, Route>;
  registry: ChannelRegistry;
}

const schema = JSON.parse(readFileSync(new URL('../../schemas/models-config.schema.json', import.meta.url), 'utf8'));

export function channelsOf(model: ModelConfig): ChannelConfig[] {
  return 'channels' in model ? model.channels : [{ provider: model.provider, upstreamModel: model.upstreamModel }];
}

/** One validator per provider type, so a provider's error names what its own type needs. */
function providerValidators(ajv: ReturnType<typeof createAjv>) {
  const branches = schema.properties.providers.additionalProperties.oneOf as Array<{ properties: { type: { const: string } } }>;
  return new Map(branches.map((b) => [b.properties.type.const, ajv.compile(b)]));
}

export function parseModelsConfig(raw: unknown): ModelsConfig {
  const ajv = createAjv({ strict: false });
  const providers = (raw as { providers?: unknown } | null)?.providers;
  if (providers && typeof providers === 'object') {
    const byType = providerValidators(ajv);
    for (const [name, p] of Object.entries(providers as Record<string, { type?: unknown }>)) {
      const check = byType.get(String(p?.type));
      if (!check)
        throw new Error(`models config is invalid: provider ${name} has type ${JSON.stringify(p?.type)}; use one of ${[...byType.keys()].join(', ')}`);
      if (!check(p)) {
        const e = check.errors?.[0];
        const detail =
          e?.keyword === 'required' ? `needs ${(e.params as { missingProperty: string }).missingProperty}` : `${e?.instancePath || ''} ${e?.message}`.trim();
        throw new Error(`models config is invalid: provider ${name} (${String((p as { type: unknown }).type)}) ${detail}`);
      }
    }
  }
  const validate = ajv.compile(schema);
  if (!validate(raw)) {
    const e = validate.errors?.[0];
    throw new Error(`models config is invalid: ${e?.instancePath || '/'} ${e?.message}`);
  }
  const config = raw as ModelsConfig;
  for (const [id, m] of Object.entries(config.models)) {
    for (const c of channelsOf(m)) {
      if (!config.providers[c.provider]) throw new Error(`models config is invalid: model ${id} names unknown provider ${c.provider}`);
    }
  }
  return config;
}

export function loadModelsConfig(path?: string): ModelsConfig {
  const url = path ? path : new URL('../../config/models.json', import.meta.url);
  return parseModelsConfig(JSON.parse(readFileSync(url, 'utf8')));
}

/** Reads an upstream key variable (config.ts's upstreamSecret, or a test's own). */
export type SecretSource = (variable: string) => string | undefined;

/** The upstream key in `variable`; a native provider without one cannot work, so start fails. */
function requiredSecret(env: SecretSource, variable: string, provider: string, models: string[]): string {
  const value = env(variable);
  if (!value) {
    const used = models.length ? `model${models.length > 1 ? 's' : ''} ${models.join(', ')}` : 'no model yet';
    throw new Error(`models config: provider ${provider} (used by ${used}) needs its upstream key in the environment variable ${variable}, which is not set`);
  }
  return value;
}

function createProvider(name: string, p: ProviderConfig, env: SecretSource, models: string[]): Provider {
  switch (p.type) {
    case 'simulated':
      return createSimulatedProvider({ tokenDelayMs: p.tokenDelayMs, imageDelayMs: p.imageDelayMs });
    case 'openai-compatible':
      // A local upstream may take no key at all; a named variable must be set.
      return createOpenAICompatibleProvider({
        baseURL: p.baseURL,
        apiKey: p.apiKeyEnv ? requiredSecret(env, p.apiKeyEnv, name, models) : '',
        timeoutMs: p.timeoutMs,
        connectTimeoutMs: p.connectTimeoutMs,
        firstByteTimeoutMs: p.firstByteTimeoutMs,
      });
    case 'anthropic':
      return createAnthropicProvider({
        baseURL: p.baseURL ?? 'https://api.anthropic.com',
        apiKey: requiredSecret(env, p.apiKeyEnv, name, models),
        version: p.version,
        structuredOutputModels: p.structuredOutputModels,
        timeoutMs: p.timeoutMs,
        connectTimeoutMs: p.connectTimeoutMs,
        firstByteTimeoutMs: p.firstByteTimeoutMs,
      });
    case 'openai':
      return createOpenAIProvider({
        baseURL: p.baseURL ?? 'https://api.openai.com/v1',
        apiKey: requiredSecret(env, p.apiKeyEnv, name, models),
        organization: p.organizationEnv ? env(p.organizationEnv) : undefined,
        project: p.projectEnv ? env(p.projectEnv) : undefined,
        timeoutMs: p.timeoutMs,
        connectTimeoutMs: p.connectTimeoutMs,
        firstByteTimeoutMs: p.firstByteTimeoutMs,
      });
    case 'azure-openai':
      // The schema asks for exactly one of endpoint and resource.
      return createAzureOpenAIProvider({
        endpoint: p.endpoint ?? azureEndpointOf(p.resource ?? ''),
        apiKey: requiredSecret(env, p.apiKeyEnv, name, models),
        apiVersion: p.apiVersion,
        deployment: p.deployment,
        timeoutMs: p.timeoutMs,
        firstByteTimeoutMs: p.firstByteTimeoutMs,
      });
    case 'gemini':
      return createGeminiProvider({
        baseURL: p.baseURL,
        apiKey: requiredSecret(env, p.apiKeyEnv, name, models),
        apiVersion: p.apiVersion,
        timeoutMs: p.timeoutMs,
        firstByteTimeoutMs: p.firstByteTimeoutMs,
      });
    case 'vertex':
    case 'vertex-anthropic': {
      // Without a credentials variable: Application Default Credentials.
      const options = {
        project: p.project,
        location: p.location,
        credentials: p.credentialsEnv ? parseCredentials(requiredSecret(env, p.credentialsEnv, name, models), p.credentialsEnv) : undefined,
        baseURL: p.baseURL,
        timeoutMs: p.timeoutMs,
        firstByteTimeoutMs: p.firstByteTimeoutMs,
      };
      return p.type === 'vertex'
        ? createVertexGeminiProvider(options)
        : createVertexAnthropicProvider({ ...options, structuredOutputModels: p.structuredOutputModels });
    }
    case 'bedrock':
      // The schema asks for both key variables or neither (then the SDK's own credential chain).
      return createBedrockProvider({
        region: p.region,
        endpoint: p.endpoint,
        credentials:
          p.accessKeyIdEnv && p.secretAccessKeyEnv
            ? {
                accessKeyId: requiredSecret(env, p.accessKeyIdEnv, name, models),
                secretAccessKey: requiredSecret(env, p.secretAccessKeyEnv, name, models),
                ...(p.sessionTokenEnv && { sessionToken: requiredSecret(env, p.sessionTokenEnv, name, models) }),
              }
            : undefined,
        timeoutMs: p.timeoutMs,
        firstByteTimeoutMs: p.firstByteTimeoutMs,
      });
  }
}

export function buildRoutes(config: ModelsConfig, env: SecretSource): Routes {
  const usedBy = new Map<string, string[]>();
  for (const [id, m] of Object.entries(config.models)) {
    for (const c of channelsOf(m)) usedBy.set(c.provider, [...(usedBy.get(c.provider) ?? []), id]);
  }
  const providers = new Map<string, Provider>();
  for (const [name, p] of Object.entries(config.providers)) providers.set(name, createProvider(name, p, env, usedBy.get(name) ?? []));
  const registry = new ChannelRegistry({ ...DEFAULT_BREAKER_POLICY, ...config.failover });
  const byModel = new Map<string, Route>();
  for (const [id, m] of Object.entries(config.models)) {
    const channels = channelsOf(m).map((c) =>
      registry.channel({ id: c.id, providerName: c.provider, provider: providers.get(c.provider)!, upstreamModel: c.upstreamModel, weight: c.weight }, id),
    );
    byModel.set(id, { channels });
  }
  return { byModel, registry };
}
