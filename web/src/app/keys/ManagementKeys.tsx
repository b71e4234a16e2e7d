// The account's management keys: for its own software that issues keys to its users through
// /v1/keys. Create one (its secret shown once, in the same dialog as an API key's), revoke one.
import { useEffect, useState } from 'preact/hooks';
import { ConfirmDialog } from '../../shared/components/Dialog.tsx';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { Field, valueOf } from '../../shared/components/Field.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import { dateOf } from '../../shared/format.ts';
import { managementKeysApi } from '../api/account.ts';
import type { ManagementKey, NewKey } from '../api/types.ts';
import { KeyCells } from './KeysTable.tsx';

export interface ManagementKeysProps {
  accountId: string;
  canManage: boolean;
  onCreated: (k: NewKey) => void;
  onProblem: (err: unknown) => void;
  onStatus: (text: string) => void;
}

export function ManagementKeys({ accountId, canManage, onCreated, onProblem, onStatus }: ManagementKeysProps) {
  const api = managementKeysApi(accountId);
  const [keys, setKeys] = useState<ManagementKey[] | null>(null);
  const [name, setName] = useState('');
  const [revoking, setRevoking] = useState<ManagementKey | null>(null);
  const load = () => api.list().then(setKeys, onProblem);
  useEffect(() => {
    load();
  }, [accountId]);
  const run = async (what: () => Promise<void>) => {
    onProblem(null);
    try {
      await what();
      await load();
    } catch (err) {
      onProblem(err);
    }
  };
  const create = (e: Event) => {
    e.preventDefault();
    run(async () => {
      onCreated({ ...(await api.create(name.trim())), name: name.trim() });
      onStatus(`The management key ${name.trim()} was created.`);
      setName('');
    });
  };
  return (
    <section class="card" aria-labelledby="mgmt-heading">
      <h2 id="mgmt-heading">Management keys</h2>
      <p class="help">
        For your own software that issues keys to its users: it creates, lists, changes and revokes this account’s keys at <code>/v1/keys</code> and can call no
        model.
      </p>
      {canManage && (
        <form class="form-grid" onSubmit={create}>
          <Field id="mgmt-name" label="Management key name">
            <input type="text" id="mgmt-name" required maxLength={200} value={name} onInput={(e) => setName(valueOf(e))} />
          </Field>
          <FormActions submit="Create management key" />
        </form>
      )}
      <DataTable
        id="mgmt-table"
        labelledBy="mgmt-heading"
        caption="Management keys"
        columns={[{ label: 'Name' }, { label: 'State' }, { label: 'Created' }, ...(canManage ? [{ label: 'Actions' }] : [])]}
        empty={keys ? 'No management keys.' : 'Loading…'}
        rows={(keys ?? []).map((k) => (
          <tr key={k.key_id}>
            <KeyCells name={k.name} masked={k.masked} state={k.status} tone={k.status === 'active' ? '' : 'danger'} />
            <td>{dateOf(k.issued_at)}</td>
            {canManage && (
              <td class="actions">
                {k.status === 'active' && (
                  <button type="button" class="secondary small" aria-label={`Revoke the management key ${k.name}`} onClick={() => setRevoking(k)}>
                    Revoke
                  </button>
                )}
              </td>
            )}
          </tr>
        ))}
      />
      <ConfirmDialog
        id="revoke-mgmt"
        open={!!revoking}
        title={`Revoke the management key ${revoking?.name ?? ''}?`}
        confirm="Revoke"
        danger
        onClose={() => setRevoking(null)}
        onConfirm={() => {
          const k = revoking!;
          setRevoking(null);
          run(async () => {
            await api.revoke(k.key_id);
            onStatus(`The management key ${k.name} was revoked.`);
          });
        }}
      >
        <p>Software using it can no longer manage keys, on every gateway, at once. The keys it made keep working.</p>
      </ConfirmDialog>
    </section>
  );
}
