// Invoices and credit notes to list and download: a key's own account's on /v1, an account's in
// /app (its owners and billing members), every account's for the operator under /admin/v1. One
// document answers as JSON, or as `?format=html` or `?format=pdf`.
import type { Context } from 'koa';
import Router from '@koa/router';
import type { Ledger } from '../ledger/ledger.ts';
import { requireId } from '../ledger/ledger.ts';
import { ApiError, badRequest } from '../http/errors.ts';
import { DocumentNumber } from '../ledger/event-atoms.ts';
import * as documentRows from '../../projections/books/documents.ts';
import { documentBody, documentHtml, documentPdf, type IssuedDocument } from './document-views.ts';

// The one definition of a document number is its event's schema.
const NUMBER = new RegExp(DocumentNumber.pattern!);
const issuedOf = (row: documentRows.DocumentRow) => ({ kind: row.kind, ...row.document }) as IssuedDocument;

function limitOf(ctx: Context): number {
  const raw = ctx.query.limit;
  if (raw === undefined) return 100;
  const n = Number(raw);
  if (typeof raw !== 'string' || !Number.isInteger(n) || n < 1 || n > 1000) throw badRequest('"limit" must be a whole number from 1 to 1000.', 'limit');
  return n;
}

/** The handlers, for whichever account `of` finds (null: every account, the operator's). */
export function documentHandlers(ledger: Ledger, of: (ctx: Context) => string | null) {
  // Found per request: routers are built (and their routes listed) before a ledger may exist.
  const readModels = () => ledger.readModels;
  return {
    list: async (ctx: Context) => {
      const limit = limitOf(ctx);
      // Documents issued a moment ago (by this gateway or another) are listed too.
      await ledger.readYourWrites();
      const { db, schema } = readModels();
      const rows = await documentRows.issued(db, schema, { accountId: of(ctx) ?? undefined, limit });
      ctx.body = { object: 'list', data: rows.map((r) => documentBody(issuedOf(r))) };
    },
    one: async (ctx: Context) => {
      const number = String(ctx.params.number ?? '');
      if (!NUMBER.test(number)) throw badRequest('That is not an invoice or credit note number (such as TG-2026-000001).', 'number');
      const format = ctx.query.format ?? 'json';
      if (format !== 'json' && format !== 'html' && format !== 'pdf') throw badRequest('"format" must be json, html or pdf.', 'format');
      await ledger.readYourWrites();
      const { db, schema } = readModels();
      const row = await documentRows.byNumber(db, schema, number);
      const accountId = of(ctx);
      // Another account's document is as unknown as one never issued.
      if (!row?.document || (accountId !== null && row.account_id !== accountId))
        throw new ApiError(404, `no invoice or credit note ${number}`, 'invalid_request_error', 'not_found', 'number');
      const doc = issuedOf(row);
      if (format === 'html') {
        ctx.type = 'text/html; charset=utf-8';
        ctx.body = documentHtml(doc);
      } else if (format === 'pdf') {
        ctx.type = 'application/pdf';
        ctx.set('content-disposition', `attachment; filename="${number}.pdf"`);
        ctx.body = await documentPdf(doc);
      } else ctx.body = documentBody(doc);
    },
  };
}

/** The operator's: `/admin/v1/invoices[?account_id=]` and `/admin/v1/invoices/:number`. */
export function adminDocumentRoutes(deps: { ledger: Ledger }): Router {
  const r = new Router();
  const handlers = documentHandlers(deps.ledger, (ctx) => (ctx.query.account_id === undefined ? null : requireId(ctx.query.account_id, 'account_id')));
  r.get('/invoices', handlers.list);
  r.get('/invoices/:number', handlers.one);
  return r;
}
