// `tollgate invoices list [<account>]` and `tollgate invoices show <number> [--format json|html|pdf]
// [--out FILE]`: the issued invoices and credit notes (src/books/document-routes.ts) from the
// command line. A PDF is written to --out, never to a terminal.
import { writeFileSync } from 'node:fs';
import { CliError, requiredArg as arg, type AdminClient, type CliArgs as Args, type CliOut as Out } from './admin-client.ts';

interface DocumentBody {
  object: 'invoice' | 'credit_note';
  number: string;
  issued_at: string;
  account_id: string;
  invoice_number?: string;
  currency: string;
  display: { total: string };
}

const line = (d: DocumentBody) =>
  `${d.number}\t${d.issued_at.slice(0, 10)}\t${d.account_id}\t${d.object === 'invoice' ? 'invoice' : `credit note for ${d.invoice_number}`}\t${d.display.total} ${d.currency}`;

export async function runInvoiceCommand(sub: string, p: Args, c: AdminClient, out: Out): Promise<void> {
  if (sub === 'list') {
    const account = p.positionals[2];
    const q = new URLSearchParams({ limit: (p.values.limit as string | undefined) ?? '1000', ...(account ? { account_id: account } : {}) });
    const r = await c.json<{ data: DocumentBody[] }>('GET', `/invoices?${q}`);
    return out(r.data.length ? r.data.map(line).join('\n') : 'no invoice issued yet', r);
  }
  const number = arg(p.positionals, 2, 'number');
  const format = (p.values.format as string | undefined) ?? 'json';
  if (!['json', 'html', 'pdf'].includes(format)) throw new CliError(`--format must be json, html or pdf, got '${format}'.`, 2);
  const file = p.values.out as string | undefined;
  if (format === 'pdf' && !file) throw new CliError('a PDF needs --out FILE.', 2);
  const path = `/invoices/${encodeURIComponent(number)}${format === 'json' ? '' : `?format=${format}`}`;
  if (format === 'json') {
    const r = await c.json<DocumentBody>('GET', path);
    if (file) writeFileSync(file, `${JSON.stringify(r, null, 2)}\n`);
    return out(line(r), r);
  }
  const body = Buffer.from(await (await c.request('GET', path)).arrayBuffer());
  if (file) {
    writeFileSync(file, body);
    return out(`${number} written to ${file} (${body.length} bytes)`, { number, file, bytes: body.length });
  }
  process.stdout.write(body);
}
