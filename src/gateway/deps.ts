import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { Ledger } from '../ledger/ledger.ts';
import type { ModelCatalog } from './model-catalog.ts';
import type { Metering } from './metering.ts';
import type { KeyDirectory } from '../http/key-directory.ts';
import type { Database } from '../eventstore/db.ts';

/** Everything a route needs, built once at start-up. */
export interface GatewayDeps {
  db: Database;
  ledger: Ledger;
  catalog: ModelCatalog;
  metering: Metering;
  keys: KeyDirectory;
  log: Logger;
  /** {base_url} as the caller reached us: origin + /v1. */
  baseUrl(ctx: Context): string;
  /** Remember the newest position this process appended, for read-your-writes on read models. */
  noteAppended(position: number): void;
  /** Wait (bounded) until read models include what this process appended (or, with a separate projector, everything committed so far). */
  readYourWrites(): Promise<void>;
}
