// The operator API under /admin/v1, behind the admin token. Every action is an event whose
// metadata records the actor ("admin:<x-tollgate-actor or 'operator'>").
import type { Context, Next } from 'koa';
import Router from '@koa/router';
import type { GatewayDeps } from '../gateway/deps.ts';
import { ApiError, badRequest, errorBody, toApiError } from '../http/errors.ts';
import { ADMIN_GUESSES_PER_MINUTE, adminTokenMatches } from '../admin/admin-token.ts';
import { ADMIN_LIMITS, jsonBody } from '../http/body.ts';
import { failureThrottle } from '../http/failure-throttle.ts';
import { toMilli } from '../ledger/pricing.ts';
import { requireId } from '../ledger/ledger.ts';
import { requireTokenAmount } from '../ledger/errors.ts';
import { maskKey } from '../ledger/keys.ts';
import { correctionInput, type CorrectionInput } from '../admin/corrections-terms.ts';
import { detailCsvFooter, detailCsvHeader, detailCsvLine } from '../admin/corrections-report.ts';
import { dryRunPage, prepareDryRun } from '../admin/corrections.ts';
import { prepareCorrection, type AppliedCorrection, type CorrectionProgress } from '../admin/corrections-apply.ts';
import { streamAnswer, type LineSink } from '../http/line-stream.ts';
import { writeStatementCsv, writeStatementJson } from '../admin/statements.ts';
import { buildUpstreamReport, upstreamReportCsv, upstreamReportQuery } from '../admin/upstream-report.ts';
import { verifyLedger, type VerifyProgress } from '../admin/audit.ts';
import { rebuildReadModels } from '../../projections/rebuild.ts';
import * as accounts from '../../projections/accounts.ts';
import * as models from '../../projections/models.ts';
import * as plans from '../../projections/plans.ts';
import { sweepExpiredHolds, sweepOrphanedHolds } from '../gateway/sweeper.ts';
import { adminConsoleRoutes } from './admin-console.ts';
import { adminKeysRoutes } from './admin-keys.ts';
import type { PlanTerms } from '../ledger/events.ts';
import { webhookAdminRouter } from './admin-webhooks.ts';
import { adminPaymentsRoutes } from './admin-payments.ts';
import { adminFinanceRoutes } from './admin-finance.ts';
import { adminMembersRoutes } from './admin-members.ts';
import { adminManagementKeyRoutes } from './admin-management-keys.ts';
import { adminCostRoutes } from './admin-cost.ts';

type Body = Record<string, unknown>;

/** The least time between two progress lines of POST /admin/v1/verify's NDJSON answer. */
const VERIFY_PROGRESS_MS = 200;

const line = (value: unknown) => JSON.stringify(value) + '\n';

/**
 * A progress listener that writes `object` lines to `out`: at most one per VERIFY_PROGRESS_MS,
 * except a phase's first and last ones.
 */
function progressLines<P extends { phase: string; done: number; total: number }>(
  out: LineSink,
  object: string,
  fields: (p: P) => object = (p) => p,
): (p: P) => void {
  let lastPhase = '';
  let lastWrite = 0;
  return (p) => {
    const now = Date.now();
    if (p.phase === lastPhase && p.done < p.total && now - lastWrite < VERIFY_PROGRESS_MS) return;
    lastPhase = p.phase;
    lastWrite = now;
    void out.write(line({ object, ...fields(p) }));
  };
}

/** The last line of a streamed answer that failed after its status was sent. */
function failureLine(log: GatewayDeps['log'], ctx: Context, what: string, advice = ''): (err: unknown) => string {
  return (err) => {
    // An unexpected failure keeps its cause in the log; the line says what it means here.
    const known = toApiError(err);
    const api =
      known.code === 'server_error'
        ? new ApiError(
            500,
            `The ${what} stopped before it finished (the gateway log has the cause).${advice ? ' ' + advice : ''}`,
            'server_error',
            'server_error',
          )
        : known;
    log.error({ err: (err as Error)?.message, requestId: ctx.state.requestId }, `${what} failed after its answer began`);
    return line({ object: 'error', status: api.status, ...errorBody(api) });
  };
}

/** How an operator's long answer is wanted: one JSON body (the default), NDJSON or CSV (`format`, or the Accept header). */
function streamFormat(ctx: Context, b: Body): 'json' | 'ndjson' | 'csv' {
  if (b.format !== undefined) {
    if (b.format !== 'json' && b.format !== 'ndjson' && b.format !== 'csv') throw badRequest("'format' must be json, ndjson or csv.", 'format');
    return b.format;
  }
  ctx.vary('Accept');
  const wanted = ctx.accepts('application/json', 'application/x-ndjson', 'text/csv');
  return wanted === 'application/x-ndjson' ? 'ndjson' : wanted === 'text/csv' ? 'csv' : 'json';
}

function adminAuth(token: string, failuresPerMinute: number) {
  // Wrong tokens are counted per source address: past the limit it is refused (429) without the token being compared.
  const guesses = failureThrottle(failuresPerMinute);
  return async (ctx: Context, next: Next) => {
    const m = /^Bearer\s+(\S+)$/i.exec(ctx.get('authorization'));
    guesses.check(ctx.ip, 'wrong admin tokens from this address');
    if (!m || !adminTokenMatches(m[1], token)) {
      if (m) guesses.record(ctx.ip);
      throw new ApiError(401, 'Missing or wrong admin token.', 'invalid_request_error', 'invalid_admin_token');
    }
    const name = ctx.get('x-tollgate-actor');
    ctx.state.actor = `admin:${/^[A-Za-z0-9_.@-]{1,64}$/.test(name) ? name : 'operator'}`;
    await next();
  };
}

const body = (ctx: Context): Body => {
  const b = ctx.request.body;
  if (!b || typeof b !== 'object' || Array.isArray(b)) throw badRequest('The request body must be a JSON object.');
  return b as Body;
};

function str(b: Body, name: string, opts: { optional?: boolean; max?: number } = {}): string {
  const v = b[name];
  if (v === undefined && opts.optional) return '';
  if (typeof v !== 'string' || v.length === 0 || v.length > (opts.max ?? 200))
    throw badRequest(`'${name}' must be a non-empty string of at most ${opts.max ?? 200} characters.`, name);
  return v;
}

// The bounds of the PlanDefined/PlanUpdated event schemas: checked here so that a value beyond
// them is the caller's 400, not a refused append (a 500).
const MAX_VALIDITY_DAYS = 3650;
const MAX_REQUESTS_PER_MINUTE = 1_000_000;
const MAX_PLAN_MODELS = 500;

function planTerms(b: Body, planId: string): PlanTerms {
  const models = b.models;
  if (
    !Array.isArray(models) ||
    models.length === 0 ||
    models.length > MAX_PLAN_MODELS ||
    new Set(models).size !== models.length ||
    !models.every((m) => typeof m === 'string' && m.length > 0 && m.length <= 100)
  ) {
    throw badRequest(`'models' must list distinct model ids (at most ${MAX_PLAN_MODELS}), or ["*"] for all.`, 'models');
  }
  const int = (name: string, min: number, max = Number.MAX_SAFE_INTEGER) => {
    const v = b[name];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max)
      throw badRequest(`'${name}' must be a whole number from ${min} to ${max}.`, name);
    return v;
  };
  return {
    planId,
    name: str(b, 'name'),
    quota: int('quota', 0),
    validityDays: int('validity_days', 1, MAX_VALIDITY_DAYS),
    requestsPerMinute: int('requests_per_minute', 1, MAX_REQUESTS_PER_MINUTE),
    models: models as string[],
  };
}

// Times the database and the events can hold: a JavaScript date may lie far outside them.
const EARLIEST = Date.UTC(1970, 0, 1);
const LATEST = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

function parseTime(v: unknown, name: string): Date {
  const d = typeof v === 'string' ? new Date(v) : new Date(NaN);
  if (Number.isNaN(d.getTime())) throw badRequest(`'${name}' must be an ISO 8601 time.`, name);
  if (d.getTime() < EARLIEST || d.getTime() > LATEST) throw badRequest(`'${name}' must be between 1970 and 9999.`, name);
  return d;
}

/** A model id or alias as the ModelPriced event holds it. */
const MAX_MODEL_ID = 100;

export function adminRouter(deps: GatewayDeps, adminToken: string, opts: { failuresPerMinute?: number } = {}): Router {
  const { ledger } = deps;
  const r = new Router({ prefix: '/admin/v1' });
  r.use(adminAuth(adminToken, opts.failuresPerMinute ?? ADMIN_GUESSES_PER_MINUTE));
  // Read only once the token matched: an unknown caller cannot make the server parse anything.
  r.use(jsonBody(ADMIN_LIMITS));
  // Ids in paths reach SQL as parameters; PostgreSQL text cannot hold a NUL, and no id is that long.
  r.param('id', (id: unknown, ctx, next) => {
    // eslint-disable-next-line no-control-regex
    if (typeof id === 'string' && (id.length > 200 || /[\u0000-\u001f]/.test(id))) throw badRequest('That id is not valid.', 'id');
    return next();
  });
  r.use(adminConsoleRoutes(deps).routes()); // GET /accounts (paginated) and /accounts/:id/balance, for the console
  r.use(adminKeysRoutes(deps).routes()); // GET /accounts/:id/keys (with controls and spend), PATCH /keys/:id, POST /keys/:id/rotate
  r.use(adminMembersRoutes(ledger).routes()); // an account's members and who changed them
  r.use(adminManagementKeyRoutes(ledger).routes()); // an account's management keys (the key-management API)

  r.get('/plans', async (ctx) => {
    await ledger.readYourWrites();
    ctx.body = { object: 'list', data: await plans.list(ledger.readModels.db, ledger.rmSchema) };
  });
  r.post('/plans', async (ctx) => {
    const b = body(ctx);
    const terms = planTerms(b, requireId(b.plan_id, 'plan_id'));
    await ledger.definePlan(terms, ctx.state.actor);
    ctx.status = 201;
    ctx.body = { object: 'plan', ...terms };
  });
  r.put('/plans/:id', async (ctx) => {
    const terms = planTerms(body(ctx), requireId(ctx.params.id, 'plan_id'));
    const res = await ledger.updatePlan(terms, ctx.state.actor);
    ctx.body = { object: 'plan', ...terms, changed: res.events.length > 0 };
  });

  r.post('/accounts', async (ctx) => {
    const b = body(ctx);
    if (b.account_id !== undefined && typeof b.account_id !== 'string')
      throw badRequest("'account_id' must be a string (or left out to generate one).", 'account_id');
    const accountId = await ledger.openAccount({ accountId: b.account_id, name: str(b, 'name') }, ctx.state.actor);
    ctx.status = 201;
    ctx.body = { object: 'account', account_id: accountId };
  });
  r.get('/accounts/:id', async (ctx) => {
    await ledger.readYourWrites();
    const row = await accounts.byId(ledger.readModels.db, ledger.rmSchema, ctx.params.id);
    if (!row) throw new ApiError(404, `account ${ctx.params.id} not found`, 'invalid_request_error', 'not_found');
    ctx.body = { object: 'account', ...row };
  });
  r.post('/accounts/:id/subscription', async (ctx) => {
    const b = body(ctx);
    const res = await ledger.subscribe(requireId(ctx.params.id, 'account_id'), requireId(b.plan_id, 'plan_id'), ctx.state.actor);
    ctx.body = { object: 'subscription', event: res.events[0].type, ...res.events[0].data };
  });
  r.post('/accounts/:id/extra-tokens', async (ctx) => {
    const b = body(ctx);
    const amount = requireTokenAmount(b.amount, 'amount');
    await ledger.grantExtra(requireId(ctx.params.id, 'account_id'), amount, typeof b.reason === 'string' ? b.reason.slice(0, 500) : '', ctx.state.actor);
    ctx.body = { object: 'extra_tokens', account_id: ctx.params.id, granted: amount };
  });
  r.post('/accounts/:id/keys', async (ctx) => {
    const b = ctx.request.body && typeof ctx.request.body === 'object' ? (ctx.request.body as Body) : {};
    const key = await ledger.issueKey(
      requireId(ctx.params.id, 'account_id'),
      typeof b.name === 'string' && b.name ? b.name.slice(0, 200) : 'default',
      ctx.state.actor,
    );
    ctx.status = 201;
    // The only time the secret leaves the gateway.
    ctx.body = { object: 'api_key', key_id: key.keyId, account_id: ctx.params.id, key: key.secret, masked: maskKey(key.last4) };
  });
  r.post('/keys/:id/revoke', async (ctx) => {
    const b = ctx.request.body && typeof ctx.request.body === 'object' ? (ctx.request.body as Body) : {};
    await ledger.revokeKey(ctx.params.id, typeof b.reason === 'string' ? b.reason.slice(0, 500) : '', ctx.state.actor);
    ctx.body = { object: 'api_key', key_id: ctx.params.id, status: 'revoked' };
  });

  r.get('/models', async (ctx) => {
    await ledger.readYourWrites();
    ctx.body = { object: 'list', data: await models.all(ledger.readModels.db, ledger.rmSchema) };
  });

  // Upstream channels: their health, and an operator's switch (each change an event with its actor).
  r.get('/channels', (ctx) => {
    ctx.body = { object: 'list', data: deps.channels.list() };
  });
  // Channel ids contain '/' (provider/upstream model).
  r.patch('/channels/*id', async (ctx) => {
    const channelId = ([] as string[]).concat(ctx.params.id as unknown as string[]).join('/');
    if (!deps.channels.has(channelId))
      throw new ApiError(
        404,
        `No channel ${channelId.slice(0, 200)} in the models config; GET /admin/v1/channels lists them.`,
        'invalid_request_error',
        'not_found',
        'channel',
      );
    const b = body(ctx);
    if (typeof b.enabled !== 'boolean') throw badRequest("'enabled' must be true or false.", 'enabled');
    const reason = typeof b.reason === 'string' ? b.reason.slice(0, 500) : '';
    const res = await ledger.setChannelEnabled(channelId, b.enabled, reason, ctx.state.actor);
    ctx.body = { object: 'channel', changed: res.events.length > 0, ...deps.channels.list().find((c) => c.id === channelId) };
  });
  // Model ids may contain '/', e.g. cx/gen-6-terra.
  r.patch('/models/*id', async (ctx) => {
    const modelId = ([] as string[]).concat(ctx.params.id as unknown as string[]).join('/');
    if (modelId.length > MAX_MODEL_ID) throw badRequest(`A model id has at most ${MAX_MODEL_ID} characters.`, 'model');
    const b = body(ctx);
    const cmd: {
      modelId: string;
      multiplierMilli?: number;
      status?: 'ACTIVE' | 'INACTIVE';
      alias?: string | null;
      cacheReadMilli?: number | null;
      cacheWriteMilli?: number | null;
    } = { modelId };
    if (b.multiplier !== undefined) cmd.multiplierMilli = toMilli(b.multiplier as number);
    // Cache weights as fractions of a plain prompt token (0.1 = a tenth); null removes one.
    for (const [field, key] of [
      ['cache_read_weight', 'cacheReadMilli'],
      ['cache_write_weight', 'cacheWriteMilli'],
    ] as const) {
      if (b[field] === undefined) continue;
      if (b[field] !== null && !(typeof b[field] === 'number' && b[field] >= 0 && b[field] <= 1000))
        throw badRequest(`'${field}' must be a number from 0 to 1000 (1 = a plain prompt token), or null.`, field);
      cmd[key] = b[field] === null ? null : Math.round((b[field] as number) * 1000);
    }
    if (b.status !== undefined) {
      if (b.status !== 'ACTIVE' && b.status !== 'INACTIVE') throw badRequest("'status' must be ACTIVE or INACTIVE.", 'status');
      cmd.status = b.status;
    }
    if (b.alias !== undefined) {
      if (b.alias !== null && (typeof b.alias !== 'string' || !b.alias || b.alias.length > MAX_MODEL_ID))
        throw badRequest(`'alias' must be a string of at most ${MAX_MODEL_ID} characters, or null.`, 'alias');
      cmd.alias = b.alias as string | null;
    }
    const res = await ledger.priceModel(cmd, ctx.state.actor);
    const m = res.state;
    // The price in force, whether this call changed it or (the same values again) appended nothing.
    ctx.body = {
      object: 'model',
      modelId: m.modelId,
      multiplierMilli: m.multiplierMilli,
      status: m.status,
      alias: m.alias,
      ...m.cache,
      changed: res.events.length > 0,
    };
  });

  const correction = (b: Body): CorrectionInput =>
    correctionInput(b, {
      modelId: str(b, 'model', { max: MAX_MODEL_ID }),
      from: parseTime(b.from, 'from'),
      to: b.to === undefined && b.also_from_now === true ? undefined : parseTime(b.to, 'to'),
    });
  r.post('/corrections', async (ctx) => {
    const b = body(ctx);
    const c = correction(b);
    const format = streamFormat(ctx, b);
    if (b.dry_run === true) {
      // A page of the detail on request: `limit` charges after the cursor `after`.
      if (b.limit !== undefined || b.after !== undefined) {
        if (b.after !== undefined && typeof b.after !== 'string') throw badRequest("'after' must be the 'next' cursor of the previous page.", 'after');
        const page = await dryRunPage(ledger, c, (b.after as string | undefined) ?? null, b.limit === undefined ? 1000 : (b.limit as number));
        ctx.body = { object: 'reconciliation.page', dry_run: true, ...page };
        return;
      }
      const run = await prepareDryRun(ledger, c);
      if (format === 'json') ctx.body = { object: 'reconciliation', dry_run: true, ...(await run()) };
      else if (format === 'csv')
        streamAnswer(
          ctx,
          'text/csv; charset=utf-8',
          async (out) => {
            await out.write(detailCsvHeader());
            return detailCsvFooter(await run({ onCharge: (charge) => out.write(detailCsvLine(charge)) }));
          },
          failureLine(deps.log, ctx, 'dry run'),
        );
      else
        streamAnswer(
          ctx,
          'application/x-ndjson',
          async (out) => {
            const report = await run({ onCharge: (charge) => out.write(line({ object: 'reconciliation.charge', ...charge })) });
            return line({ object: 'reconciliation', dry_run: true, ...report });
          },
          failureLine(deps.log, ctx, 'dry run'),
        );
      return;
    }
    const apply = await prepareCorrection(ledger, c, ctx.state.actor);
    const answer = (result: AppliedCorrection) => ({
      object: 'reconciliation',
      dry_run: false,
      appended: result.appended,
      already_applied: result.alreadyApplied,
      passes: result.passes,
      ...result.report,
    });
    if (format !== 'ndjson') {
      ctx.body = answer(await apply());
      return;
    }
    // Progress lines as verify's, then the report; an interrupted apply is finished by asking again.
    streamAnswer(
      ctx,
      'application/x-ndjson',
      async (out) => {
        return line(answer(await apply({ onProgress: progressLines<CorrectionProgress>(out, 'correction.progress') })));
      },
      failureLine(deps.log, ctx, 'correction', 'Run the same correction again to finish it: what was appended stays, and nothing is appended twice.'),
    );
  });

  r.get('/accounts/:id/statement', async (ctx) => {
    const from = parseTime(ctx.query.from, 'from');
    const to = parseTime(ctx.query.to, 'to');
    if (from >= to) throw badRequest("'from' must be before 'to'.", 'from');
    const accountId = requireId(ctx.params.id, 'account_id');
    await ledger.caughtUp();
    // Streamed a page of lines at a time: the same document, in bounded memory.
    if (ctx.query.format === 'csv')
      streamAnswer(
        ctx,
        'text/csv; charset=utf-8',
        (out) => writeStatementCsv(ledger, accountId, from, to, (t) => out.write(t)),
        failureLine(deps.log, ctx, 'statement'),
      );
    else
      streamAnswer(
        ctx,
        'application/json; charset=utf-8',
        (out) => writeStatementJson(ledger, accountId, from, to, (t) => out.write(t)),
        failureLine(deps.log, ctx, 'statement'),
      );
  });
  r.get('/upstream-report', async (ctx) => {
    const query = upstreamReportQuery(ctx.query);
    await ledger.readYourWrites();
    const report = await buildUpstreamReport(ledger, query);
    if (query.format === 'csv') {
      ctx.type = 'text/csv; charset=utf-8';
      ctx.body = upstreamReportCsv(report);
    } else ctx.body = { object: 'upstream_report', ...report };
  });

  r.post('/verify', async (ctx) => {
    // One JSON body, unless the client asks for NDJSON progress (Accept: application/x-ndjson
    // preferred to application/json; a client that sends */* or nothing gets the JSON body).
    ctx.vary('Accept');
    if (ctx.accepts('application/json', 'application/x-ndjson') !== 'application/x-ndjson') {
      ctx.body = { object: 'verification', ...(await verifyLedger(ledger)) };
      return;
    }
    streamAnswer(
      ctx,
      'application/x-ndjson',
      async (out) => {
        const onProgress = progressLines<VerifyProgress>(out, 'verification.progress', (p) => ({ phase: p.phase, done: p.done, total: p.total }));
        return line({ object: 'verification', ...(await verifyLedger(ledger, { onProgress })) });
      },
      failureLine(deps.log, ctx, 'verification', 'It only reads: nothing was changed; run it again.'),
    );
  });
  r.post('/sweep', async (ctx) => {
    const orphaned = await sweepOrphanedHolds(ledger, { db: ledger.readModels.db, schema: ledger.schema });
    ctx.body = { object: 'sweep', released: orphaned + (await sweepExpiredHolds(ledger)), of_lost_processes: orphaned };
  });
  r.get('/events', async (ctx) => {
    // Checked before the stream starts: a failure once it runs can only cut the connection.
    const after = ctx.query.after === undefined ? 0 : Number(ctx.query.after);
    if (!Number.isSafeInteger(after) || after < 0) throw badRequest("'after' must be an event position (a whole number >= 0).", 'after');
    // NDJSON for an outside auditor, streamed page by page.
    const { PassThrough } = await import('node:stream');
    const out = new PassThrough();
    ctx.type = 'application/x-ndjson';
    ctx.body = out;
    void (async () => {
      let position = after;
      for (;;) {
        const page = await ledger.events.readAll(position, 5000);
        if (page.length === 0) break;
        out.write(page.map((e) => JSON.stringify(e)).join('\n') + '\n');
        position = page[page.length - 1].position;
      }
      out.end();
    })().catch((e) => out.destroy(e));
  });
  r.post('/rebuild', async (ctx) => {
    // Progress as NDJSON lines; the old tables answer reads until the swap.
    const { PassThrough } = await import('node:stream');
    const out = new PassThrough();
    ctx.type = 'application/x-ndjson';
    ctx.body = out;
    void rebuildReadModels(ledger.readModels.db, ledger.events, ledger.rmSchema, {
      onProgress: (p) => out.write(JSON.stringify({ type: 'progress', ...p }) + '\n'),
    })
      .then((done) => {
        out.end(JSON.stringify({ type: 'done', ...done }) + '\n');
      })
      .catch((e) => {
        out.end(JSON.stringify({ type: 'error', message: (e as Error).message }) + '\n');
      });
  });
  r.use(webhookAdminRouter(deps).routes());
  r.use(adminPaymentsRoutes(deps, deps.payments, deps.paymentSettings).routes()); // prices, payments, refunds, disputes, code batches
  r.use(adminFinanceRoutes(deps).routes()); // /finance: report, reconciliation, journal, lots
  r.use(adminCostRoutes(deps, deps.paymentSettings).routes()); // upstream cost rates, cost per day and call, bills and their reconciliation
  return r;
}
