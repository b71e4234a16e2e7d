// Wires the gateway together: database, ledger, caches, upstream routes, HTTP server.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { Context } from 'koa';
import pino, { type Logger } from 'pino';
import { openDatabase, type Database } from './eventstore/db.ts';
import { openLedger, type Ledger } from './ledger/ledger.ts';
import { createModelCatalog } from './gateway/model-catalog.ts';
import { buildRoutes, loadModelsConfig } from './gateway/models-config.ts';
import { createMetering } from './gateway/metering.ts';
import { createKeyDirectory } from './http/key-directory.ts';
import { createMemoryRateLimiter } from './http/rate-limit.ts';
import { ensureIdempotencyTable } from './http/idempotency.ts';
import { warmValidators } from './http/validate.ts';
import { warmTokenizer } from './upstream/tokenizer.ts';
import { startSweeper } from './gateway/sweeper.ts';
import { createApp } from './app.ts';
import type { GatewayDeps } from './gateway/deps.ts';
import type { Settings } from './config.ts';
import { bootstrapDemo } from './gateway/bootstrap.ts';

export interface RunningGateway {
  url: string;
  baseUrl: string;
  ledger: Ledger;
  db: Database;
  deps: GatewayDeps;
  demo: { keySecret: string; accountId: string } | null;
  close(): Promise<void>;
}

export async function startGateway(settings: Settings, log: Logger = pino({ level: settings.logLevel })): Promise<RunningGateway> {
  let dataDir: string | undefined;
  if (!settings.databaseUrl && settings.dataDir) {
    mkdirSync(settings.dataDir, { recursive: true, mode: 0o700 });
    dataDir = join(settings.dataDir, 'pglite');
  }
  const db = await openDatabase({ url: settings.databaseUrl, dataDir });
  const ledger = await openLedger({ db, schema: settings.schema, projections: settings.projections });
  await ensureIdempotencyTable(db, settings.schema);
  await ledger.seedModels();
  await ledger.caughtUp();
  const routes = buildRoutes(loadModelsConfig(settings.modelsConfig));
  const catalog = await createModelCatalog({ db, store: ledger.store, rmSchema: ledger.rmSchema, routes });
  const keys = await createKeyDirectory({ db, store: ledger.store, rmSchema: ledger.rmSchema, waitForProjections: ledger.runner ? () => ledger.runner!.caughtUp() : undefined });
  warmTokenizer();
  warmValidators(['chat-completions', 'images']);

  let lastAppended = 0;
  const deps: GatewayDeps = {
    db, ledger, catalog, keys, log,
    metering: createMetering(ledger),
    rateLimiter: createMemoryRateLimiter(),
    baseUrl: (ctx: Context) => settings.publicBaseUrl ?? `${ctx.protocol}://${ctx.host}/v1`,
    noteAppended: (p) => { if (p > lastAppended) lastAppended = p; },
    readYourWrites: async () => { if (ledger.runner && lastAppended > ledger.runner.position) await ledger.runner.waitFor(lastAppended, 2000); },
  };
  const demo = settings.bootstrap ? await bootstrapDemo(ledger) : null;

  const app = createApp(deps);
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(settings.port, settings.host, () => resolve(s));
  });
  server.keepAliveTimeout = 65_000;
  const sweeper = startSweeper(ledger, settings.sweepIntervalMs, (e) => log.warn({ err: e.message }, 'hold sweep failed'));
  const address = server.address() as AddressInfo;
  const url = `http://${settings.host.includes(':') ? `[${settings.host}]` : settings.host}:${address.port}`;

  return {
    url, baseUrl: settings.publicBaseUrl ?? `${url}/v1`, ledger, db, deps, demo,
    async close() {
      sweeper.stop();
      await new Promise<void>((r) => { server.close(() => r()); server.closeIdleConnections(); });
      await keys.close();
      await catalog.close();
      await ledger.close();
      await db.close();
    },
  };
}
