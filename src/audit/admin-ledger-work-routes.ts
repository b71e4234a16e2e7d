// The operator's work on the whole log: corrections (dry run and apply, streamed as NDJSON or CSV
// on request), statements, the upstream report, verify with its progress, the hold sweep, the
// event export and the read models' rebuild.
import type { Context } from 'koa';
import Router from '@koa/router';
import type { RouteDeps } from '../http/route-deps.ts';
import { ApiError, badRequest, errorBody, toApiError } from '../http/errors.ts';
import { requireId } from '../ledger/ledger.ts';
import { correctionInput, type CorrectionInput } from './corrections-terms.ts';
import { detailCsvFooter, detailCsvHeader, detailCsvLine } from './corrections-report.ts';
import { dryRunPage, prepareDryRun } from './corrections.ts';
import { prepareCorrection, type AppliedCorrection, type CorrectionProgress } from './corrections-apply.ts';
import { streamAnswer, type LineSink } from '../http/line-stream.ts';
import { writeStatementCsv, writeStatementJson } from './statements.ts';
import { writeEventLog } from './event-export.ts';
import { currentOperatorShare, Pacer } from './pacing.ts';
import { buildUpstreamReport, upstreamReportCsv, upstreamReportQuery } from '../catalogue/index.ts';
import { verifyLedger, type VerifyProgress } from './verification.ts';
import { rebuildReadModels } from '../../projections/runner/rebuild.ts';
import { sweepExpiredCredits, sweepExpiredHolds, sweepOrphanedHolds } from '../calls/index.ts';
import { body, MAX_MODEL_ID, parseTime, str, type Body } from '../http/admin-input.ts';

/**
 * Whether a verification reads the whole log (`{"full": true}` or `?full=true`) rather than what
 * came after the last checkpoint.
 */
function verifyFully(ctx: Context): boolean {
  const b = ctx.request.body as Body | undefined;
  const given = b && typeof b === 'object' && !Array.isArray(b) && 'full' in b ? b.full : ctx.query.full;
  if (given === undefined) return false;
  if (given === true || given === 'true') return true;
  if (given === false || given === 'false') return false;
  throw badRequest("'full' must be true or false.", 'full');
}

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
function failureLine(log: RouteDeps['log'], ctx: Context, what: string, advice = ''): (err: unknown) => string {
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

export function adminLedgerWorkRoutes(deps: RouteDeps): Router {
  const { ledger } = deps;
  const r = new Router();
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
      // Where its money lands: the books date a correction's bookings by its own event, today, in an open month.
      const today = new Date().toISOString().slice(0, 10);
      const lands = { money_booked_on: today, money_booked_in: today.slice(0, 7) };
      if (format === 'json') ctx.body = { object: 'reconciliation', dry_run: true, ...lands, ...(await run()) };
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
            return line({ object: 'reconciliation', dry_run: true, ...lands, ...report });
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
    const full = verifyFully(ctx);
    // One JSON body, unless the client asks for NDJSON progress (Accept: application/x-ndjson
    // preferred to application/json; a client that sends */* or nothing gets the JSON body).
    ctx.vary('Accept');
    if (ctx.accepts('application/json', 'application/x-ndjson') !== 'application/x-ndjson') {
      ctx.body = { object: 'verification', ...(await verifyLedger(ledger, { full })) };
      return;
    }
    streamAnswer(
      ctx,
      'application/x-ndjson',
      async (out) => {
        const onProgress = progressLines<VerifyProgress>(out, 'verification.progress', (p) => ({ phase: p.phase, done: p.done, total: p.total }));
        return line({ object: 'verification', ...(await verifyLedger(ledger, { onProgress, full })) });
      },
      failureLine(deps.log, ctx, 'verification', 'It only reads: nothing was changed; run it again.'),
    );
  });
  r.post('/sweep', async (ctx) => {
    const orphaned = await sweepOrphanedHolds(ledger, { db: ledger.readModels.db, schema: ledger.schema });
    const released = orphaned + (await sweepExpiredHolds(ledger));
    ctx.body = { object: 'sweep', released, of_lost_processes: orphaned, credits_expired: await sweepExpiredCredits(ledger) };
  });
  r.get('/events', async (ctx) => {
    // Checked before the stream starts: a failure once it runs can only be told as the last line.
    const after = ctx.query.after === undefined ? 0 : Number(ctx.query.after);
    if (!Number.isSafeInteger(after) || after < 0) throw badRequest("'after' must be an event position (a whole number >= 0).", 'after');
    // NDJSON for an outside auditor: a page at a time, as fast as the client reads, within the operator share.
    streamAnswer(ctx, 'application/x-ndjson', (out) => writeEventLog(ledger, after, (t) => out.write(t)), failureLine(deps.log, ctx, 'export of the log'));
  });
  r.post('/rebuild', async (ctx) => {
    // Progress as NDJSON lines; the old tables answer reads until the swap.
    const { PassThrough } = await import('node:stream');
    const out = new PassThrough();
    ctx.type = 'application/x-ndjson';
    ctx.body = out;
    // Beside live calls: off the event loop where it can be, within the operator share. The pacer
    // starts at the first paced step: on PostgreSQL that is the catch-up after the threads, which
    // kept to the share themselves.
    let pacer: Pacer | null = null;
    void rebuildReadModels(ledger.readModels.db, ledger.events, ledger.rmSchema, {
      onProgress: (p) => out.write(JSON.stringify({ type: 'progress', ...p }) + '\n'),
      serving: { share: currentOperatorShare(), pace: (opts) => (pacer ??= new Pacer()).step(opts) },
    })
      .then((done) => {
        out.end(JSON.stringify({ type: 'done', ...done }) + '\n');
      })
      .catch((e) => {
        deps.log.error({ err: (e as Error).message, requestId: ctx.state.requestId }, 'rebuild failed after its answer began');
        out.end(JSON.stringify({ type: 'error', message: (e as Error).message }) + '\n');
      })
      .finally(() => pacer?.stop());
  });
  return r;
}
