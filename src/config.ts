// Every setting is an environment variable, and this is the one module that reads them; these
// are the defaults for the embedded setup.
import { DEFAULT_PG_TIMEOUTS, type PgTimeouts } from './eventstore/db.ts';
import { LEDGER_DEADLINE_MS } from './calls/ledger-deadline.ts';
import { ADMIN_GUESSES_PER_MINUTE } from './http/admin-token.ts';
import { DEFAULT_MODEL_CALL_MB } from './http/body.ts';
import { SERIES_PATTERN } from './books/documents.ts';
import type { DocumentSettings } from './books/document-issuer.ts';
import { readFileSync } from 'node:fs';
import { parseTaxTable, type TaxSettings } from './money/tax.ts';
export interface Settings {
  port: number;
  host: string;
  databaseUrl?: string;
  /** Where embedded PGlite keeps its files; empty means in memory (tests). */
  dataDir: string;
  schema: string;
  modelsConfig?: string;
  projections: boolean;
  publicBaseUrl?: string;
  logLevel: string;
  /** LOG_FORMAT: 'json' (one JSON object a line), 'pretty' (readable lines), or unset: pretty on a terminal, JSON otherwise. */
  logFormat?: 'json' | 'pretty';
  /** TOLLGATE_SWEEP_INTERVAL_MS: how often holds of lapsed processes and expired holds are released. */
  sweepIntervalMs: number;
  /** TOLLGATE_PROCESS_LEASE_MS: a gateway's lease; its holds are released this long (plus a sweep) after it dies. */
  processLeaseMs: number;
  /** TOLLGATE_HOLD_LINGER_MS: how long a non-streamed call's hold waits for its charge to share one append (0: never; unset: the ledger's default). */
  holdLingerMs?: number;
  bootstrap: boolean;
  /** TOLLGATE_ADMIN_TOKEN (at least 32 characters); unset means the token file in the data directory. */
  adminToken?: string;
  /** TOLLGATE_ADMIN_AUTH_FAILURES_PER_MINUTE: wrong admin tokens one source may send a minute before its wrong ones get 429s (the right one never does). */
  adminFailuresPerMinute: number;
  /** TOLLGATE_METRICS_TOKEN: /metrics on the public port, for `Authorization: Bearer <token>` only. */
  metricsToken?: string;
  /**
   * OpenTelemetry traces: exported when the standard OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set
   * (src/tracing/sdk.ts); TOLLGATE_TRACE_ACCOUNTS=on adds the account and key ids to a call's span.
   */
  traceAccounts: boolean;
  /**
   * TOLLGATE_OPERATOR_SHARE (above 0, at most 1; default 1): the share of wall time operator work
   * (dry runs, applies, verify, statements, the log's export) may take in a serving gateway; between
   * its steps it rests so that live calls find the loop and the database free the rest of the time.
   */
  operatorShare: number;
  /** TOLLGATE_CALL_PHASES=on: where each call's wall time goes, phase by phase, on /metrics (src/tracing/call-phases.ts). */
  callPhases: boolean;
  /** TOLLGATE_METRICS_PORT (and TOLLGATE_METRICS_HOST, default HOST): /metrics on a port of its own, without a token. */
  metricsPort?: number;
  metricsHost?: string;
  /** TOLLGATE_IDEMPOTENCY_TTL_HOURS: how long an Idempotency-Key's response is kept before the sweeper purges it. */
  idempotencyTtlHours: number;
  /** TOLLGATE_INVALID_REQUESTS_PER_MINUTE: requests a key may have refused as invalid (4xx before any decision) a minute before it gets 429s. */
  invalidRequestsPerMinute: number;
  /** TOLLGATE_MAX_REQUEST_MB: the largest model-call body once decompressed (default 10; each MB costs ~3 MB of memory while parsed). */
  maxRequestMb: number;
  /** EVENT_STORE: where the events live; read models, rate limits and idempotency stay in PostgreSQL. */
  eventStore: 'postgres' | 'kurrentdb';
  /** KURRENTDB_URL, e.g. kurrentdb://127.0.0.1:2113?tls=false (used when eventStore is kurrentdb). */
  kurrentDbUrl?: string;
  /** PG_POOL_SIZE: PostgreSQL connections per process. */
  pgPoolSize: number;
  /** PG_CONNECT_TIMEOUT_MS, PG_STATEMENT_TIMEOUT_MS, PG_IDLE_IN_TRANSACTION_TIMEOUT_MS, PG_KEEPALIVE_MS (see PgTimeouts). */
  pgTimeouts: PgTimeouts;
  /** TOLLGATE_READY_TIMEOUT_MS: /readyz answers 503 when the database has not answered within this. */
  readyTimeoutMs: number;
  /** TOLLGATE_LEDGER_DEADLINE_MS: the longest a metered call waits for the ledger, all its steps together (then 503). */
  ledgerDeadlineMs: number;
  /** TOLLGATE_RELEASE_RETRY_MAX: holds kept in memory for release after an outage (past it, the stale-hold sweep). */
  releaseRetryMax: number;
  /** TOLLGATE_STALE_HOLD_MS: this process's open holds of calls it no longer runs are released past this age. */
  staleHoldMs: number;
  /** TOLLGATE_READY_MAX_LAG_EVENTS / _SECONDS: /readyz answers 503 past these. */
  readyMaxLag: { events: number; seconds: number };
  /** TOLLGATE_SHUTDOWN_GRACE_MS: how long SIGTERM waits for in-flight calls. */
  shutdownGraceMs: number;
  /** TOLLGATE_TRUST_PROXY=1: X-Forwarded-* headers are believed (behind a load balancer). */
  trustProxy: boolean;
  /** Reads the upstream key variable a models config names (the keys never live in a file). */
  upstreamSecret(variable: string): string | undefined;
  /** Webhook notifications (src/webhooks): TOLLGATE_WEBHOOK_* below. */
  webhooks: WebhookSettings;
  /** Payments (src/payments): TOLLGATE_CURRENCY and the STRIPE_* variables below. */
  payments: PaymentSettings;
  /** The customers' side of /app (src/customers): sign-in by email link or OpenID Connect, sign-up. */
  customers: CustomerSettings;
}

export interface CustomerSettings {
  /** TOLLGATE_PUBLIC_URL: the origin people reach /app at (links in mail, OIDC redirect, Checkout's way back; https makes cookies Secure). Unset: the base URL's origin (src/http/public-origin.ts), never the request's. */
  publicUrl?: string;
  /** TOLLGATE_SMTP_URL (smtp://user:pass@host:587 or smtps://…): sign-in links are mailed through it; unset: printed to the console log. */
  smtpUrl?: string;
  /** TOLLGATE_MAIL_FROM: the From of sign-in mail. */
  mailFrom: string;
  /** TOLLGATE_SIGN_IN_LINK_MINUTES: how long a link works (1-15). */
  linkMinutes: number;
  /** TOLLGATE_SESSION_HOURS: how long a session lasts. */
  sessionHours: number;
  /** TOLLGATE_SIGN_IN_ATTEMPTS_PER_MINUTE: link requests one address may make a minute (counted across gateways), known or not. */
  signInAttemptsPerMinute: number;
  /** TOLLGATE_SIGNUP=open: an unknown address that signs in gets an account of its own (else invitation only). */
  signUpOpen: boolean;
  /** TOLLGATE_SIGNUP_PLAN: the plan a signed-up account starts on (none: no plan until it buys one). */
  signUpPlan?: string;
  /** TOLLGATE_OIDC_ISSUER, _CLIENT_ID, _CLIENT_SECRET, _REDIRECT_URI, _NAME: one OpenID Connect provider (off without issuer and client id). */
  oidc: { issuer: string; clientId: string; clientSecret?: string; redirectUri?: string; name: string } | null;
}

/**
 * How invoices and credit notes are numbered and whom they name as seller. A series that could
 * not make a valid number stops the start, so no document is refused later for it.
 */
export function documentSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): DocumentSettings {
  const series = env.TOLLGATE_INVOICE_SERIES || 'TG';
  if (!SERIES_PATTERN.test(series))
    throw new Error(`TOLLGATE_INVOICE_SERIES must be 1 to 10 capitals and digits starting with a capital (such as TG), not ${JSON.stringify(series)}`);
  const country = env.TOLLGATE_SELLER_COUNTRY || null;
  if (country !== null && !/^[A-Z]{2}$/.test(country)) throw new Error('TOLLGATE_SELLER_COUNTRY must be an ISO 3166-1 alpha-2 code such as DE');
  return {
    series,
    seller: {
      name: (env.TOLLGATE_SELLER_NAME || 'Tollgate').slice(0, 200),
      // Address lines are separated by `;` (one environment variable).
      addressLines: (env.TOLLGATE_SELLER_ADDRESS ?? '')
        .split(';')
        .map((l) => l.trim().slice(0, 200))
        .filter((l) => l !== '')
        .slice(0, 4),
      country,
      taxId: env.TOLLGATE_SELLER_TAX_ID?.trim().slice(0, 32) || null,
      email: env.TOLLGATE_SELLER_EMAIL || null,
    },
  };
}

/**
 * The tax table (TOLLGATE_TAX_TABLE: the JSON itself, or the path of a file holding it) and the
 * seller's country it is read against. A table that does not parse stops the start.
 */
export function taxSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): TaxSettings {
  const sellerCountry = documentSettingsFromEnv(env).seller.country;
  const given = env.TOLLGATE_TAX_TABLE?.trim();
  if (!given) return { table: new Map(), sellerCountry };
  let json = given;
  if (!given.startsWith('{')) {
    try {
      json = readFileSync(given, 'utf8');
    } catch (err) {
      throw new Error(`TOLLGATE_TAX_TABLE: ${given} is neither a JSON object nor a readable file (${(err as Error).message})`, { cause: err });
    }
  }
  try {
    return { table: parseTaxTable(json), sellerCountry };
  } catch (err) {
    throw new Error(`TOLLGATE_TAX_TABLE: ${(err as Error).message}`, { cause: err });
  }
}

export function customerSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): CustomerSettings {
  const issuer = env.TOLLGATE_OIDC_ISSUER || '';
  const clientId = env.TOLLGATE_OIDC_CLIENT_ID || '';
  return {
    publicUrl: env.TOLLGATE_PUBLIC_URL?.replace(/\/+$/, '') || undefined,
    smtpUrl: env.TOLLGATE_SMTP_URL || undefined,
    mailFrom: env.TOLLGATE_MAIL_FROM || 'Tollgate <no-reply@localhost>',
    linkMinutes: Math.min(15, Math.max(1, Number(env.TOLLGATE_SIGN_IN_LINK_MINUTES ?? 15))),
    sessionHours: Number(env.TOLLGATE_SESSION_HOURS ?? 12),
    signInAttemptsPerMinute: Number(env.TOLLGATE_SIGN_IN_ATTEMPTS_PER_MINUTE ?? 5),
    signUpOpen: env.TOLLGATE_SIGNUP === 'open',
    signUpPlan: env.TOLLGATE_SIGNUP_PLAN || undefined,
    oidc:
      issuer && clientId
        ? {
            issuer,
            clientId,
            clientSecret: env.TOLLGATE_OIDC_CLIENT_SECRET || undefined,
            redirectUri: env.TOLLGATE_OIDC_REDIRECT_URI || undefined,
            name: env.TOLLGATE_OIDC_NAME || 'single sign-on',
          }
        : null,
  };
}

/** The Stripe path (src/books/stripe.ts): its keys, API origin and return pages. */
export interface StripeSettings {
  /** STRIPE_SECRET_KEY: unset turns the Stripe path off. */
  secretKey?: string;
  /** STRIPE_WEBHOOK_SECRET: the endpoint's signing secret (whsec_...). */
  webhookSecret?: string;
  /** STRIPE_API_BASE: another API origin (a local double in tests), e.g. http://127.0.0.1:12111. */
  apiBase?: string;
  /** STRIPE_SUCCESS_URL / STRIPE_CANCEL_URL: where Checkout sends the customer back. */
  successUrl: string;
  cancelUrl: string;
}

export interface PaymentSettings {
  /** TOLLGATE_CURRENCY: the ledger's settlement currency (ISO 4217), set on first start; default USD. */
  currency: string;
  /** TOLLGATE_DISPUTE_SUSPENDS_KEYS=off: an open dispute does not suspend the account's keys. */
  disputeSuspendsKeys: boolean;
  /** TOLLGATE_CODE_ATTEMPTS_PER_HOUR: wrong or used codes an account may send per UTC hour (counted across gateways). */
  codeAttemptsPerHour: number;
  /** TOLLGATE_BILL_TOLERANCE_MINOR: how far (minor units) Tollgate's cost of a day, model and channel may be from an imported bill's and still agree; default 1. */
  billToleranceMinor: number;
  /** STRIPE_*: the Stripe path (off without a secret key and a webhook secret). */
  stripe: StripeSettings;
  /** TOLLGATE_INVOICE_SERIES and TOLLGATE_SELLER_*: how invoices and credit notes are numbered and whom they name as seller. */
  documents: DocumentSettings;
  /** TOLLGATE_TAX_TABLE: the tax rate, name and price basis by the buyer's country (none: nothing is taxed). */
  tax: TaxSettings;
}

export interface WebhookSettings {
  /** TOLLGATE_WEBHOOKS=off: no dispatcher in this process and the webhook admin API answers 503. */
  enabled: boolean;
  /** TOLLGATE_WEBHOOK_SECRET: the master secret signing secrets are derived from; unset means <data dir>/webhook-secret. */
  masterSecret?: string;
  /** TOLLGATE_WEBHOOK_ALLOW_HOSTS: host names or addresses (comma-separated) allowed although private, and over http. */
  allowHosts: string[];
  /** TOLLGATE_WEBHOOK_RETRY_BASE_MS / _MAX_MS: the first retry's delay, doubled each time up to the cap. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** TOLLGATE_WEBHOOK_RETRY_FOR_MS: how long after the notification it is retried before it is marked failed (24 h). */
  retryForMs: number;
  /** TOLLGATE_WEBHOOK_CHECK_INTERVAL_MS: how often plan expiry is checked. */
  checkIntervalMs: number;
  /** TOLLGATE_WEBHOOK_TIMEOUT_MS: how long one delivery may take. */
  timeoutMs: number;
}

export function webhookSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): WebhookSettings {
  return {
    enabled: env.TOLLGATE_WEBHOOKS !== 'off',
    masterSecret: env.TOLLGATE_WEBHOOK_SECRET || undefined,
    allowHosts: (env.TOLLGATE_WEBHOOK_ALLOW_HOSTS ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter(Boolean),
    retryBaseMs: Number(env.TOLLGATE_WEBHOOK_RETRY_BASE_MS ?? 10_000),
    retryMaxMs: Number(env.TOLLGATE_WEBHOOK_RETRY_MAX_MS ?? 3_600_000),
    retryForMs: Number(env.TOLLGATE_WEBHOOK_RETRY_FOR_MS ?? 86_400_000),
    checkIntervalMs: Number(env.TOLLGATE_WEBHOOK_CHECK_INTERVAL_MS ?? 60_000),
    timeoutMs: Number(env.TOLLGATE_WEBHOOK_TIMEOUT_MS ?? 10_000),
  };
}

/** What the `tollgate` operator commands need: where the gateway is and its admin token. */
export interface CliSettings {
  url: string;
  adminToken?: string;
  dataDir: string;
}

export function cliSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): CliSettings {
  return {
    url: env.TOLLGATE_URL ?? `http://127.0.0.1:${env.PORT ?? 8787}`,
    adminToken: env.TOLLGATE_ADMIN_TOKEN || undefined,
    dataDir: env.TOLLGATE_DATA_DIR ?? '.data',
  };
}

export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Settings {
  return {
    port: Number(env.PORT ?? 8787),
    host: env.HOST ?? '127.0.0.1',
    databaseUrl: env.DATABASE_URL || undefined,
    dataDir: env.TOLLGATE_DATA_DIR ?? '.data',
    schema: env.TOLLGATE_SCHEMA ?? 'tollgate',
    modelsConfig: env.TOLLGATE_MODELS_CONFIG || undefined,
    projections: env.TOLLGATE_PROJECTIONS !== 'off',
    publicBaseUrl: env.TOLLGATE_PUBLIC_BASE_URL || undefined,
    logLevel: env.LOG_LEVEL ?? 'info',
    logFormat: logFormatFrom(env.LOG_FORMAT),
    sweepIntervalMs: Number(env.TOLLGATE_SWEEP_INTERVAL_MS ?? 5_000),
    processLeaseMs: Number(env.TOLLGATE_PROCESS_LEASE_MS ?? 10_000),
    holdLingerMs: env.TOLLGATE_HOLD_LINGER_MS ? Number(env.TOLLGATE_HOLD_LINGER_MS) : undefined,
    bootstrap: env.TOLLGATE_BOOTSTRAP !== 'off',
    adminToken: env.TOLLGATE_ADMIN_TOKEN || undefined,
    adminFailuresPerMinute: Number(env.TOLLGATE_ADMIN_AUTH_FAILURES_PER_MINUTE ?? ADMIN_GUESSES_PER_MINUTE),
    metricsToken: env.TOLLGATE_METRICS_TOKEN || undefined,
    traceAccounts: env.TOLLGATE_TRACE_ACCOUNTS === 'on',
    callPhases: env.TOLLGATE_CALL_PHASES === 'on',
    operatorShare: operatorShareFrom(env.TOLLGATE_OPERATOR_SHARE),
    metricsPort: env.TOLLGATE_METRICS_PORT ? Number(env.TOLLGATE_METRICS_PORT) : undefined,
    metricsHost: env.TOLLGATE_METRICS_HOST || undefined,
    idempotencyTtlHours: Number(env.TOLLGATE_IDEMPOTENCY_TTL_HOURS ?? 24),
    invalidRequestsPerMinute: Number(env.TOLLGATE_INVALID_REQUESTS_PER_MINUTE ?? 60),
    maxRequestMb: Number(env.TOLLGATE_MAX_REQUEST_MB ?? DEFAULT_MODEL_CALL_MB),
    eventStore: eventStoreFrom(env.EVENT_STORE),
    kurrentDbUrl: env.KURRENTDB_URL || undefined,
    pgPoolSize: Number(env.PG_POOL_SIZE ?? 10),
    pgTimeouts: {
      connectMs: Number(env.PG_CONNECT_TIMEOUT_MS ?? DEFAULT_PG_TIMEOUTS.connectMs),
      statementMs: Number(env.PG_STATEMENT_TIMEOUT_MS ?? DEFAULT_PG_TIMEOUTS.statementMs),
      idleInTransactionMs: Number(env.PG_IDLE_IN_TRANSACTION_TIMEOUT_MS ?? DEFAULT_PG_TIMEOUTS.idleInTransactionMs),
      keepAliveMs: Number(env.PG_KEEPALIVE_MS ?? DEFAULT_PG_TIMEOUTS.keepAliveMs),
    },
    readyTimeoutMs: Number(env.TOLLGATE_READY_TIMEOUT_MS ?? 2000),
    ledgerDeadlineMs: Number(env.TOLLGATE_LEDGER_DEADLINE_MS ?? LEDGER_DEADLINE_MS),
    releaseRetryMax: Number(env.TOLLGATE_RELEASE_RETRY_MAX ?? 10_000),
    staleHoldMs: Number(env.TOLLGATE_STALE_HOLD_MS ?? 60_000),
    readyMaxLag: { events: Number(env.TOLLGATE_READY_MAX_LAG_EVENTS ?? 10_000), seconds: Number(env.TOLLGATE_READY_MAX_LAG_SECONDS ?? 30) },
    shutdownGraceMs: Number(env.TOLLGATE_SHUTDOWN_GRACE_MS ?? 30_000),
    trustProxy: env.TOLLGATE_TRUST_PROXY === '1',
    upstreamSecret: (variable) => env[variable] || undefined,
    webhooks: webhookSettingsFromEnv(env),
    customers: customerSettingsFromEnv(env),
    payments: {
      currency: env.TOLLGATE_CURRENCY || 'USD',
      disputeSuspendsKeys: env.TOLLGATE_DISPUTE_SUSPENDS_KEYS !== 'off',
      codeAttemptsPerHour: Number(env.TOLLGATE_CODE_ATTEMPTS_PER_HOUR ?? 10),
      billToleranceMinor: Number(env.TOLLGATE_BILL_TOLERANCE_MINOR ?? 1),
      documents: documentSettingsFromEnv(env),
      tax: taxSettingsFromEnv(env),
      stripe: {
        secretKey: env.STRIPE_SECRET_KEY || undefined,
        webhookSecret: env.STRIPE_WEBHOOK_SECRET || undefined,
        apiBase: env.STRIPE_API_BASE || undefined,
        successUrl: env.STRIPE_SUCCESS_URL || `${env.TOLLGATE_PUBLIC_BASE_URL?.replace(/\/v1\/?$/, '') || `http://127.0.0.1:${env.PORT ?? 8787}`}/app?paid=1`,
        cancelUrl: env.STRIPE_CANCEL_URL || `${env.TOLLGATE_PUBLIC_BASE_URL?.replace(/\/v1\/?$/, '') || `http://127.0.0.1:${env.PORT ?? 8787}`}/app`,
      },
    },
  };
}

function eventStoreFrom(value: string | undefined): Settings['eventStore'] {
  if (!value || value === 'postgres') return 'postgres';
  if (value === 'kurrentdb') return 'kurrentdb';
  throw new Error(`EVENT_STORE must be postgres or kurrentdb, not ${JSON.stringify(value)}`);
}

function logFormatFrom(value: string | undefined): 'json' | 'pretty' | undefined {
  if (!value) return undefined;
  if (value === 'json' || value === 'pretty') return value;
  throw new Error(`LOG_FORMAT must be json or pretty (or unset: pretty on a terminal, JSON otherwise), not ${JSON.stringify(value.slice(0, 40))}`);
}

function operatorShareFrom(value: string | undefined): number {
  if (value === undefined || value === '') return 1;
  const share = Number(value);
  if (share > 0 && share <= 1) return share;
  throw new Error(`TOLLGATE_OPERATOR_SHARE must be a number above 0 and at most 1 (such as 0.5), not ${JSON.stringify(value.slice(0, 40))}`);
}
