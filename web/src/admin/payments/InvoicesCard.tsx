// The invoices and credit notes issued so far, every account's, newest first; each downloadable as
// a PDF (fetched with the admin token, offered as a file).
import { useState } from 'preact/hooks';
import { adminCall, admin, enc } from '../api/client.ts';
import type { List } from '../api/types.ts';
import { Loading } from '../../shared/components/Page.tsx';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { money } from '../../shared/format.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { useLoaded } from '../../shared/useLoaded.ts';
import { saveAsFile } from '../../shared/download.ts';
import { documentKind, PdfCell } from '../../shared/components/DocumentCells.tsx';

/** GET /admin/v1/invoices: issued documents (src/books/document-views.ts). */
interface IssuedDocument {
  object: 'invoice' | 'credit_note';
  number: string;
  issued_at: string;
  account_id: string;
  invoice_number?: string;
  total: number;
  currency: string;
  buyer: { name: string };
}

export function InvoicesCard() {
  const list = useLoaded(async () => (await admin<List<IssuedDocument>>('invoices?limit=200')).data);
  const [status, setStatus] = useState('');
  const download = async (d: IssuedDocument) => {
    try {
      const res = await adminCall(`invoices/${enc(d.number)}?format=pdf`);
      saveAsFile(await res.blob(), `${d.number}.pdf`, 'application/pdf');
      setStatus(`Downloaded ${d.number}.pdf.`);
    } catch (err) {
      list.setProblem(err);
    }
  };
  return (
    <section class="card" aria-labelledby="invoices-heading" aria-busy={list.busy ? 'true' : 'false'}>
      <h2 id="invoices-heading">Invoices and credit notes</h2>
      <p class="help">
        Issued for every payment (a redeemed code's excepted) and every refund or lost dispute; the latest 200. A document never changes once issued.
      </p>
      <ProblemRegion problem={list.problem} onDismiss={() => list.setProblem(null)} />
      {list.data ? (
        <DataTable
          caption="Invoices and credit notes, newest first"
          tableId="invoices-table"
          columns={['Number', 'Issued', 'Account', 'Bill to', 'Document', '#Total', 'PDF']}
          empty="No invoice issued yet."
          rows={list.data.map((d) => (
            <tr key={d.number} data-document={d.number}>
              <th scope="row">
                <code>{d.number}</code>
              </th>
              <td>{d.issued_at.slice(0, 10)}</td>
              <td>{d.account_id}</td>
              <td>{d.buyer.name}</td>
              <td>{documentKind(d)}</td>
              <td class="num" data-col="total" data-value={d.total}>
                {money(d.total, d.currency)}
              </td>
              <PdfCell number={d.number} onDownload={() => download(d)} />
            </tr>
          ))}
        />
      ) : (
        !list.failed && <Loading text="Reading the invoices…" />
      )}
      <p class="help" role="status" aria-live="polite">
        {status}
      </p>
    </section>
  );
}
