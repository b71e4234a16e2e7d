// What the native upstream tests share (Gemini, Vertex AI, Azure OpenAI): a real gateway (real
// HTTP, the run's database) over a models config of their own, logging every line into memory so
// a test can read them, the ledger readers (the charge of a call, the holds released), and a
// client that leaves a stream.
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import pino from 'pino';
import * as assert from 'uvu/assert';
import { settingsFromEnv } from '../../src/config.ts';
import { startGateway, type RunningGateway } from '../../src/server.ts';
import { priceModel } from '../../src/catalogue/index.ts';
import { streams } from '../../src/ledger/events.ts';
import { dropSchemas } from './gateway.ts';
import { uniqueSchema } from './db.ts';
import { eventually, writeModelsConfig, type ExtraChannel } from './http.ts';
import { sseData } from './azure-openai-double.ts';

type Data = Record<string, any>;

export interface LoggedGateway {
  gw: RunningGateway;
  /** Every log line of the gateway, at debug level. */
  logLines: string[];
  /** Closes the gateway (with this grace, default the settings'), drops its schema and config; once. */
  stop(graceMs?: number): Promise<void>;
}

/** A gateway over these providers and models (each priced at `multiplierMilli`), its secrets read from `env` only. */
export async function startLoggedGateway(
  providers: Record<string, unknown>,
  models: Record<string, { provider: string; upstreamModel: string } | { channels: ExtraChannel[] }>,
  env: Record<string, string>,
  multiplierMilli: number,
): Promise<LoggedGateway> {
  const logLines: string[] = [];
  const path = writeModelsConfig({ providers, models });
  const settings = {
    ...settingsFromEnv({}),
    upstreamSecret: (variable: string) => env[variable],
    port: 0,
    dataDir: '',
    schema: uniqueSchema('upstream'),
    databaseUrl: process.env.DATABASE_URL || undefined,
    logLevel: 'debug',
    modelsConfig: path,
  };
  let stopped = false;
  const gw = await startGateway(settings, pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) }));
  for (const modelId of Object.keys(models)) await priceModel(gw.ledger, { modelId, multiplierMilli, status: 'ACTIVE', alias: null }, 'admin:test');
  await gw.ledger.caughtUp();
  return {
    gw,
    logLines,
    stop: async (graceMs?: number) => {
      if (stopped) return;
      stopped = true;
      await gw.close(graceMs);
      if (settings.databaseUrl) await dropSchemas(settings.databaseUrl, settings.schema);
      rmSync(dirname(path), { recursive: true, force: true });
    },
  };
}

export interface AccountLedger {
  charges: Data[];
  releases: Data[];
  holds: Data[];
}

export async function ledgerOf(gw: RunningGateway, accountId: string): Promise<AccountLedger> {
  const events = await gw.ledger.events.readStream(streams.account(accountId), 0);
  const of = (type: string) => events.filter((e) => e.type === type).map((e) => e.data as Data);
  return { charges: of('ChatCharged'), releases: of('ReservationReleased'), holds: of('QuotaReserved') };
}

/** The account's ledger once `settled` calls were charged or released. */
export function settled(gw: RunningGateway, accountId: string, count = 1): Promise<AccountLedger> {
  return eventually(
    () => ledgerOf(gw, accountId),
    (x) => x.charges.length + x.releases.length >= count,
  );
}

/** The one charge of an account's one call, once settled. */
export async function onlyCharge(gw: RunningGateway, accountId: string): Promise<Data> {
  const l = await settled(gw, accountId);
  assert.equal([l.holds.length, l.charges.length, l.releases.length], [1, 1, 0], `one hold, charged: ${JSON.stringify(l.releases)}`);
  return l.charges[0]!;
}

/** Reads a streamed chat completion until `deltas` content deltas arrived, then leaves (drops the connection). */
export async function leaveChatStream(gw: RunningGateway, key: string, body: unknown, deltas: number): Promise<string> {
  const leave = new AbortController();
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: leave.signal,
  });
  let text = '';
  let seen = 0;
  try {
    for await (const data of sseData(res.body!)) {
      const content = data === '[DONE]' ? undefined : (JSON.parse(data) as Data).choices?.[0]?.delta?.content;
      if (!content) continue;
      text += content;
      if (++seen === deltas) {
        leave.abort();
        break;
      }
    }
  } catch (err) {
    // Node's fetch rejects the body's read once it is aborted: that is the leaving, not a failure.
    if (!leave.signal.aborted) throw err;
  }
  return text;
}

/** A charge's usage equals the usageMetadata the double sent, to the token, and its price follows (the ledger leaves out zero details). */
export function assertChargedAsSent(charge: Data, sent: Data, multiplierMilli: number): void {
  const thoughts = sent.thoughtsTokenCount ?? 0;
  assert.equal(
    [charge.promptTokens, charge.completionTokens, charge.cachedTokens ?? 0, charge.reasoningTokens ?? 0],
    [sent.promptTokenCount, (sent.candidatesTokenCount ?? 0) + thoughts, sent.cachedContentTokenCount ?? 0, thoughts],
  );
  assert.is(charge.billed, Math.ceil(((charge.promptTokens + charge.completionTokens) * multiplierMilli) / 1000));
}
