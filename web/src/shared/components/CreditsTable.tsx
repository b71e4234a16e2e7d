// The grants of extra tokens with terms (an expiry, a priority, a scope of models), as the customer's
// usage page and the console's account page both show them: the open ones in the order they are
// drawn, then those expired. The other extra tokens never expire and are not listed.
import { DataTable } from './DataTable.tsx';
import { dateOf, fmt, relativeDays, when } from '../format.ts';
import type { Credit } from '../v1.ts';

export function CreditsTable({ credits, tableId }: { credits: Credit[]; tableId: string }) {
  return (
    <div class="credits-terms">
      <DataTable
        caption="Credits with an expiry or a scope"
        captionVisible
        tableId={tableId}
        columns={['Left', 'Expires', { label: 'Models', class: 'models' }, 'Priority', 'Status']}
        rows={credits.map((c, i) => (
          <tr key={i} data-status={c.status}>
            <td data-value={c.remaining}>{`${fmt(c.remaining)} of ${fmt(c.granted)}`}</td>
            <td data-value={c.expires_at ?? ''} title={c.expires_at ? when(c.expires_at) : undefined}>
              {c.expires_at ? (
                <>
                  <span class="when">{dateOf(c.expires_at)}</span> <span class="when">({relativeDays(c.expires_at)})</span>
                </>
              ) : (
                'Never'
              )}
            </td>
            <td class="models">{c.models ? c.models.join(', ') : 'All models'}</td>
            <td>{c.priority}</td>
            <td>
              <span class={`status-pill ${c.status === 'expired' ? 'expired' : 'active'}`}>{c.status === 'expired' ? 'Expired' : 'Active'}</span>
            </td>
          </tr>
        ))}
      />
    </div>
  );
}
