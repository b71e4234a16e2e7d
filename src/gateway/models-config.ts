// Loads the models config (ajv-validated) and builds one provider per entry.
import { readFileSync } from 'node:fs';
import { createAjv } from '../ajv.ts';
import type { Provider } from '../upstream/port.ts';
import { createSimulatedProvider } from '../upstream/simulated.ts';
import { createOpenAICompatibleProvider } from '../upstream/openai-compatible.ts';

type ProviderConfig =
  | { type: 'simulated'; tokenDelayMs?: number; imageDelayMs?: number }
  | { type: 'openai-compatible'; baseURL: string; apiKeyEnv?: string; timeoutMs?: number };

export interface ModelsConfig {
  providers: Record<string, ProviderConfig>;
  models: Record<string, { provider: string; upstreamModel: string }>;
}

export interface Route { provider: Provider; upstreamModel: string }

const schema = JSON.parse(readFileSync(new URL('../../schemas/models-config.schema.json', import.meta.url), 'utf8'));

export function parseModelsConfig(raw: unknown): ModelsConfig {
  const validate = createAjv({ strict: false }).compile(schema);
  if (!validate(raw)) {
    const e = validate.errors?.[0];
    throw new Error(`models config is invalid: ${e?.instancePath || '/'} ${e?.message}`);
  }
  const config = raw as ModelsConfig;
  for (const [id, m] of Object.entries(config.models)) {
    if (!config.providers[m.provider]) throw new Error(`models config is invalid: model ${id} names unknown provider ${m.provider}`);
  }
  return config;
}

export function loadModelsConfig(path?: string): ModelsConfig {
  const url = path ? path : new URL('../../config/models.json', import.meta.url);
  return parseModelsConfig(JSON.parse(readFileSync(url, 'utf8')));
}

export function buildRoutes(config: ModelsConfig, env: NodeJS.ProcessEnv = process.env): Map<string, Route> {
  const providers = new Map<string, Provider>();
  for (const [name, p] of Object.entries(config.providers)) {
    providers.set(name, p.type === 'simulated'
      ? createSimulatedProvider({ tokenDelayMs: p.tokenDelayMs, imageDelayMs: p.imageDelayMs })
      : createOpenAICompatibleProvider({ baseURL: p.baseURL, apiKey: p.apiKeyEnv ? env[p.apiKeyEnv] ?? '' : '', timeoutMs: p.timeoutMs }));
  }
  return new Map(Object.entries(config.models).map(([id, m]) => [id, { provider: providers.get(m.provider)!, upstreamModel: m.upstreamModel }]));
}
