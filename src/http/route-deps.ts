// What every feature's routes may be given, built once at start-up by the wiring (src/wiring/deps.ts).
// Each feature adds the services of its own it needs (src/calls/call-deps.ts, …); the wiring's
// GatewayDeps is all of them together, so a route asks for what it uses and no more.
import type { Logger } from 'pino';
import type { Database } from '../eventstore/db.ts';
import type { Ledger } from '../ledger/ledger.ts';
import type { ChannelRegistry } from '../upstream/channels/registry.ts';

export interface RouteDeps {
  db: Database;
  ledger: Ledger;
  /** Every model's upstream channels and their health. */
  channels: ChannelRegistry;
  log: Logger;
  /** {base_url} named in answers: TOLLGATE_PUBLIC_BASE_URL, else the public origin + /v1, else as the caller reached us (the request's protocol and host). */
  baseUrl(request: { protocol: string; host: string }): string;
  /** The origin of every link Tollgate sends or redirects to (src/http/public-origin.ts); null: none configured. */
  publicOrigin(): string | null;
}
