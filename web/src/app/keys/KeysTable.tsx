// The account's keys: name and masked secret, state, spend against the limit (with a meter),
// models, expiry, last use; Rotate and Revoke for a role that may manage keys.
import { DataTable } from '../../shared/components/DataTable.tsx';
import { dateOf, fmt } from '../../shared/format.ts';
import type { ApiKey } from '../api/types.ts';

const PER: Record<string, string> = { daily: 'today', weekly: 'this week', monthly: 'this month', none: 'in total' };

function stateOf(k: ApiKey): [string, string] {
  if (k.status === 'revoked') return ['revoked', 'danger'];
  if (k.expired) return ['expired', 'danger'];
  if (k.rotation) return ['being replaced', 'muted'];
  return ['active', ''];
}

function Spend({ k }: { k: ApiKey }) {
  const spent = k.spend.spent + k.spend.reserved;
  if (!k.spend_limit) return <span>{fmt(spent)} tokens, no limit</span>;
  const limit = k.spend_limit.tokens;
  const text = `${fmt(spent)} of ${fmt(limit)} tokens ${PER[k.spend_limit.period] ?? ''}`;
  return (
    <>
      <span>{text}</span>
      <meter
        class="spend"
        min={0}
        max={Math.max(limit, 1)}
        low={limit * 0.8}
        high={limit * 0.95}
        optimum={0}
        value={Math.min(spent, limit)}
        aria-label={`${text} (limit)`}
      >
        {text}
      </meter>
    </>
  );
}

/** A key's name over its masked secret, then its state as a tag. */
export function KeyCells({ name, masked, state, tone }: { name: string; masked: string; state: string; tone: string }) {
  return (
    <>
      <td>
        <strong>{name}</strong>
        <br />
        <code class="muted">{masked}</code>
      </td>
      <td>
        <span class={`role-tag ${tone}`}>{state}</span>
      </td>
    </>
  );
}

export function KeysTable({
  keys,
  canManage,
  onRotate,
  onRevoke,
}: {
  keys: ApiKey[] | null;
  canManage: boolean;
  onRotate: (k: ApiKey) => void;
  onRevoke: (k: ApiKey) => void;
}) {
  const columns = [{ label: 'Application' }, { label: 'State' }, { label: 'Spend' }, { label: 'Models' }, { label: 'Expires' }, { label: 'Last used' }];
  if (canManage) columns.push({ label: 'Actions' });
  return (
    <DataTable
      id="keys-table"
      labelledBy="keys-heading"
      caption="Your account's keys"
      columns={columns}
      empty={keys ? 'No keys yet.' : 'Loading…'}
      rows={(keys ?? []).map((k) => {
        const [state, tone] = stateOf(k);
        const live = k.status === 'active' && !k.expired;
        return (
          <tr key={k.key_id} data-key-id={k.key_id}>
            <KeyCells name={k.name} masked={k.masked} state={state} tone={tone} />
            <td>
              <Spend k={k} />
            </td>
            <td>{k.models ? k.models.join(', ') : 'all of the plan'}</td>
            <td>{k.expires_at ? dateOf(k.expires_at) : 'never'}</td>
            <td>{k.last_used_at ? dateOf(k.last_used_at) : 'not yet'}</td>
            {canManage && (
              <td class="actions">
                {live && (
                  <div class="row">
                    <button type="button" class="secondary small" onClick={() => onRotate(k)} aria-label={`Rotate ${k.name}`}>
                      Rotate
                    </button>
                    <button type="button" class="secondary small" onClick={() => onRevoke(k)} aria-label={`Revoke ${k.name}`}>
                      Revoke
                    </button>
                  </div>
                )}
              </td>
            )}
          </tr>
        );
      })}
    />
  );
}
