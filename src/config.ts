// Every setting is an environment variable; these are the defaults for the embedded setup.
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
  sweepIntervalMs: number;
  bootstrap: boolean;
  /** TOLLGATE_ADMIN_TOKEN; unset means the token file in the data directory. */
  adminToken?: string;
  /** EVENT_STORE: where the events live; read models, rate limits and idempotency stay in PostgreSQL. */
  eventStore: 'postgres' | 'kurrentdb';
  /** KURRENTDB_URL, e.g. kurrentdb://127.0.0.1:2113?tls=false (used when eventStore is kurrentdb). */
  kurrentDbUrl?: string;
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
    sweepIntervalMs: Number(env.TOLLGATE_SWEEP_INTERVAL_MS ?? 30_000),
    bootstrap: env.TOLLGATE_BOOTSTRAP !== 'off',
    adminToken: env.TOLLGATE_ADMIN_TOKEN || undefined,
    eventStore: eventStoreFrom(env.EVENT_STORE),
    kurrentDbUrl: env.KURRENTDB_URL || undefined,
  };
}

function eventStoreFrom(value: string | undefined): Settings['eventStore'] {
  if (!value || value === 'postgres') return 'postgres';
  if (value === 'kurrentdb') return 'kurrentdb';
  throw new Error(`EVENT_STORE must be postgres or kurrentdb, not ${JSON.stringify(value)}`);
}
