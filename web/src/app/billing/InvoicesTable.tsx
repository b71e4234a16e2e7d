// The account's invoices and credit notes, newest first, each downloadable as a PDF (fetched with
// the session and offered as a file). Issued documents never change: a refund adds a credit note.
import { useEffect, useState } from 'preact/hooks';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { saveAsFile } from '../../shared/download.ts';
import { documentKind, PdfCell } from '../../shared/components/DocumentCells.tsx';
import { dateOf } from '../../shared/format.ts';
import { Loading } from '../../shared/components/Page.tsx';
import type { BillingApi } from './api.ts';
import type { IssuedDocument } from './types.ts';

interface Props {
  api: BillingApi;
  /** Changes when the page reloads its data (a payment may have issued a document meanwhile). */
  reloads: number;
  onProblem: (err: unknown) => void;
}

export function InvoicesTable({ api, reloads, onProblem }: Props) {
  const [documents, setDocuments] = useState<IssuedDocument[] | null>(null);
  const [status, setStatus] = useState('');
  useEffect(() => {
    let current = true;
    api.documents().then(
      (found) => current && setDocuments(found),
      (err: unknown) => current && onProblem(err),
    );
    return () => {
      current = false;
    };
  }, [api, reloads]);
  const download = async (d: IssuedDocument) => {
    try {
      const res = await api.documentPdf(d.number);
      const name = `${d.number}.pdf`;
      saveAsFile(await res.blob(), name, 'application/pdf');
      setStatus(`Downloaded ${name}.`);
    } catch (err) {
      onProblem(err);
    }
  };
  return (
    <section class="card" aria-labelledby="invoices-heading">
      <h2 id="invoices-heading">Invoices and credit notes</h2>
      {!documents ? (
        <Loading text="Loading the invoices…" />
      ) : (
        <DataTable
          id="invoices-table"
          labelledBy="invoices-heading"
          caption="Invoices and credit notes, newest first"
          columns={['Number', 'Date', 'Document', 'Total', 'PDF'].map((label) => ({ label, class: label === 'Document' ? 'text-cell' : undefined }))}
          empty="No invoices yet: each payment issues one."
          rows={documents.map((d) => (
            <tr key={d.number} data-document={d.number}>
              <th scope="row">{d.number}</th>
              <td>{dateOf(d.issued_at)}</td>
              <td class="text-cell">{documentKind(d)}</td>
              <td>
                {d.display.total} {d.currency}
              </td>
              <PdfCell number={d.number} onDownload={() => download(d)} />
            </tr>
          ))}
        />
      )}
      <p id="invoice-status" class="help" role="status" aria-live="polite">
        {status}
      </p>
    </section>
  );
}
