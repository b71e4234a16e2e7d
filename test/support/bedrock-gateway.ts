// What the Bedrock upstream tests share (upstream-bedrock*.test.ts): the Bedrock doubles and an
// OpenAI double for failover, a real gateway (real HTTP, the run's database) over a models config
// with `bedrock` providers, logging every line into memory, and the charge and secret checks (the
// ledger readers and the client that leaves are upstream-gateway.ts's).
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import pino from 'pino';
import * as assert from 'uvu/assert';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { settingsFromEnv } from '../../src/config.ts';
import { startGateway, type RunningGateway } from '../../src/server.ts';
import { priceModel } from '../../src/catalogue/index.ts';
import { dropSchemas } from './gateway.ts';
import { uniqueSchema } from './db.ts';
import { writeModelsConfig, type TestAccount } from './http.ts';
import { startOpenAIDouble, type OpenAIDouble } from './openai-double.ts';
import { BEDROCK_ACCESS_KEY_ID, BEDROCK_SECRET_ACCESS_KEY, startBedrockDouble, type BedrockDouble } from './bedrock-double.ts';

export { ledgerOf, leaveChatStream, onlyCharge, settled } from './upstream-gateway.ts';

type Data = Record<string, any>;

export const MODEL = 'anthropic.claude-sonnet-4-5-20250929-v1:0';
export const NOVA = 'amazon.nova-pro-v1:0';
export const REPLY = 'Bedrock answers the gateway with a short and predictable reply from its model.';
export const OTHER_REPLY = 'The other channel answers.';
export const MILLI = 1200;
export const FIRST_BYTE_TIMEOUT_MS = 500;
/** The silence a `bedrockSlow` channel accepts between stream events. */
export const SILENCE_TIMEOUT_MS = 600;
export const WRONG_SECRET = 'wrongBedrockSecret/NEVERshown+0123456789';
export const SESSION_TOKEN = 'IQoJb3JpZ2luX2VjEBedrockDoubleSessionToken0123456789abcdef';
/** Every credential the tests hand the gateway: none may show in a reply or a log line. */
export const SECRETS = [BEDROCK_ACCESS_KEY_ID, BEDROCK_SECRET_ACCESS_KEY, WRONG_SECRET, SESSION_TOKEN];
const ENV: Record<string, string> = {
  TG_AWS_KEY_ID: BEDROCK_ACCESS_KEY_ID,
  TG_AWS_SECRET: BEDROCK_SECRET_ACCESS_KEY,
  TG_AWS_WRONG_SECRET: WRONG_SECRET,
  TG_AWS_SESSION: SESSION_TOKEN,
  TG_GPT_KEY: 'test-openai-key',
};

export interface BedrockWorld {
  bedrock: BedrockDouble;
  /** A second Bedrock that takes temporary credentials (a session token) only. */
  temporary: BedrockDouble;
  gpt: OpenAIDouble;
  gw: RunningGateway;
  logLines: string[];
  openai(acct: TestAccount): OpenAI;
  anthropic(acct: TestAccount): Anthropic;
  stop(): Promise<void>;
}

/** The doubles and a gateway whose models route to them (see MODELS below). */
export async function startBedrockWorld(): Promise<BedrockWorld> {
  const bedrock = await startBedrockDouble({ reply: REPLY });
  const temporary = await startBedrockDouble({ reply: REPLY, sessionToken: SESSION_TOKEN });
  const gpt = await startOpenAIDouble({ reply: OTHER_REPLY });
  const provider = (endpoint: string, extra: Data = {}) => ({
    type: 'bedrock',
    region: 'us-east-1',
    endpoint,
    accessKeyIdEnv: 'TG_AWS_KEY_ID',
    secretAccessKeyEnv: 'TG_AWS_SECRET',
    timeoutMs: 5000,
    ...extra,
  });
  const models = {
    'test/bedrock': { provider: 'bedrock', upstreamModel: MODEL },
    'test/bedrock-nova': { provider: 'bedrock', upstreamModel: NOVA },
    'test/bedrock-titan': { provider: 'bedrock', upstreamModel: 'amazon.titan-embed-text-v2:0' },
    'test/bedrock-unknown': { provider: 'bedrock', upstreamModel: 'anthropic.claude-imaginary-v9:0' },
    'test/bedrock-badsecret': { provider: 'bedrockBadSecret', upstreamModel: MODEL },
    'test/bedrock-session': { provider: 'bedrockSession', upstreamModel: MODEL },
    'test/bedrock-chain': { provider: 'bedrockChain', upstreamModel: MODEL },
    'test/bedrock-err': { channels: [{ provider: 'bedrock', upstreamModel: MODEL, id: 'bedrock-err' }] },
    'test/bedrock-fo': {
      channels: [
        { provider: 'bedrock', upstreamModel: MODEL, id: 'fo-bedrock' },
        { provider: 'gpt', upstreamModel: 'gpt-up-1', id: 'fo-gpt' },
      ],
    },
    'test/bedrock-fo-fast': {
      channels: [
        { provider: 'bedrockFast', upstreamModel: MODEL, id: 'fast-bedrock' },
        { provider: 'gpt', upstreamModel: 'gpt-up-1', id: 'fast-gpt' },
      ],
    },
    'test/bedrock-fo-slow': {
      channels: [
        { provider: 'bedrockSlow', upstreamModel: MODEL, id: 'slow-bedrock' },
        { provider: 'gpt', upstreamModel: 'gpt-up-1', id: 'slow-gpt' },
      ],
    },
    'test/bedrock-fo-cred': {
      channels: [
        { provider: 'bedrockBadSecret', upstreamModel: MODEL, id: 'cred-bedrock' },
        { provider: 'gpt', upstreamModel: 'gpt-up-1', id: 'cred-gpt' },
      ],
    },
  };
  const path = writeModelsConfig({
    providers: {
      bedrock: provider(bedrock.url),
      bedrockBadSecret: provider(bedrock.url, { secretAccessKeyEnv: 'TG_AWS_WRONG_SECRET' }),
      bedrockFast: provider(bedrock.url, { firstByteTimeoutMs: FIRST_BYTE_TIMEOUT_MS }),
      bedrockSlow: provider(bedrock.url, { timeoutMs: SILENCE_TIMEOUT_MS }),
      bedrockSession: provider(temporary.url, { sessionTokenEnv: 'TG_AWS_SESSION' }),
      // No key variables: the SDK's own chain (here the AWS_* environment variables) signs.
      bedrockChain: { type: 'bedrock', region: 'us-east-1', endpoint: bedrock.url, timeoutMs: 5000 },
      gpt: { type: 'openai', baseURL: `${gpt.url}/v1`, apiKeyEnv: 'TG_GPT_KEY', timeoutMs: 5000 },
    },
    models,
    // The breakers stay closed: every failover test expects its Bedrock channel to be tried.
    failover: { failureThreshold: 1000, coolDownMs: 1 },
  });
  process.env.AWS_ACCESS_KEY_ID = BEDROCK_ACCESS_KEY_ID;
  process.env.AWS_SECRET_ACCESS_KEY = BEDROCK_SECRET_ACCESS_KEY;
  delete process.env.AWS_SESSION_TOKEN;
  delete process.env.AWS_PROFILE;
  const settings = {
    ...settingsFromEnv({}),
    upstreamSecret: (variable: string) => ENV[variable],
    port: 0,
    dataDir: '',
    schema: uniqueSchema('bdr'),
    databaseUrl: process.env.DATABASE_URL || undefined,
    logLevel: 'debug',
    modelsConfig: path,
  };
  const logLines: string[] = [];
  const gw = await startGateway(settings, pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) }));
  for (const modelId of Object.keys(models)) await priceModel(gw.ledger, { modelId, multiplierMilli: MILLI, status: 'ACTIVE', alias: null }, 'admin:test');
  await gw.ledger.caughtUp();
  return {
    bedrock,
    temporary,
    gpt,
    gw,
    logLines,
    openai: (acct) => new OpenAI({ apiKey: acct.key, baseURL: gw.baseUrl, maxRetries: 0 }),
    anthropic: (acct) => new Anthropic({ apiKey: acct.key, baseURL: gw.url, maxRetries: 0 }),
    stop: async () => {
      // A short grace: the connection of a test client that left mid-stream is otherwise waited
      // for the whole default grace (30 s; the same in upstream-azure-openai.test.ts).
      await gw.close(2000);
      if (settings.databaseUrl) await dropSchemas(settings.databaseUrl, settings.schema);
      rmSync(dirname(path), { recursive: true, force: true });
      for (const d of [bedrock, temporary, gpt]) await d.close();
    },
  };
}

/**
 * The charge is Bedrock's usage to the token, as AWS documents it: prompt = inputTokens +
 * cacheReadInputTokens + cacheWriteInputTokens, completion = outputTokens, cached = the reads,
 * cache writes = the writes; and the price follows from it (the ledger leaves out zero details).
 */
export function assertChargedAsSent(charge: Data, sent: Data): void {
  const read = sent.cacheReadInputTokens ?? 0;
  const write = sent.cacheWriteInputTokens ?? 0;
  assert.equal(
    [charge.promptTokens, charge.completionTokens, charge.cachedTokens ?? 0, charge.cacheWriteTokens ?? 0],
    [sent.inputTokens + read + write, sent.outputTokens, read, write],
  );
  assert.is(charge.billed, Math.ceil(((charge.promptTokens + charge.completionTokens) * MILLI) / 1000));
}

export function assertNoSecret(text: string): void {
  SECRETS.forEach((secret, i) => assert.not.ok(text.includes(secret), `credential ${i} of SECRETS leaked`));
}
