// The cells an invoice or credit note shows in both consoles' tables: what it is, and its PDF button.

/** "Invoice", or "Credit note for <the invoice it credits>". */
export const documentKind = (d: { object: 'invoice' | 'credit_note'; invoice_number?: string }): string =>
  d.object === 'invoice' ? 'Invoice' : `Credit note for ${d.invoice_number ?? ''}`;

export function PdfCell({ number, onDownload }: { number: string; onDownload: () => void }) {
  return (
    <td>
      <button type="button" class="secondary small" aria-label={`Download ${number} as a PDF`} onClick={onDownload}>
        PDF
      </button>
    </td>
  );
}
