// An account's API keys: the list with each key's state and controls, issuing one (its secret
// shown once), editing a key's limits and revoking one after a confirmation.
import { useRef, useState } from 'preact/hooks';
import { confirmAction } from '../../shared/components/ConfirmDialog.tsx';
import { admin, enc } from '../api/client.ts';
import type { KeyRow, List } from '../api/types.ts';
import { announce } from '../../shared/components/announce.tsx';
import { InputField } from '../../shared/components/Field.tsx';
import { Loading, Pill, Result } from '../../shared/components/Page.tsx';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { fmt, when } from '../../shared/format.ts';
import { useLoaded } from '../../shared/useLoaded.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { useAction } from '../../shared/useAction.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import { KeyLimitsForm } from './KeyLimitsForm.tsx';
import { NewSecret, type IssuedKey } from './NewSecret.tsx';

const PERIOD_TEXT: Record<string, string> = { none: 'in total', daily: 'a day', weekly: 'a week', monthly: 'a month' };

/** A key's state: revoked, expired (its own expires_at passed) or active. */
function KeyStatus({ k }: { k: KeyRow }) {
  if (k.status !== 'active') return <Pill state="revoked" text="Revoked" />;
  return k.expired ? <Pill state="expired" text="Expired" /> : <Pill state="active" text="Active" />;
}

/** A key's controls in words: its spend limit and what is left of it, its models, its expiry. */
function Controls({ k }: { k: KeyRow }) {
  const left = k.spend?.remaining;
  return (
    <td class="note controls">
      {k.spend_limit ? (
        <span class="control" data-field="spend_limit" data-value={k.spend_limit.tokens}>
          {`${fmt(k.spend_limit.tokens)} tokens ${PERIOD_TEXT[k.spend_limit.period] ?? k.spend_limit.period}`}
          {k.spend ? ` (${fmt(k.spend.spent)} spent${typeof left === 'number' ? `, ${fmt(left)} left` : ''})` : ''}
        </span>
      ) : (
        <span class="control">No spend limit</span>
      )}
      <span class="control" data-field="models">
        {k.models ? `Models: ${k.models.join(', ')}` : 'Every model of the plan'}
      </span>
      {k.expires_at && (
        <span class="control" data-field="key_expires_at">
          {`${k.expired ? 'Expired' : 'Expires'} ${when(k.expires_at)}`}
        </span>
      )}
    </td>
  );
}

export function KeysCard({ accountId }: { accountId: string }) {
  const loaded = useLoaded(async () => (await admin<List<KeyRow>>(`accounts/${enc(accountId)}/keys`)).data);
  const { data: keys, busy, failed, problem, setProblem, load } = loaded;
  const [done, setDone] = useState('');
  const [editing, setEditing] = useState<KeyRow | null>(null);
  const [issued, setIssued] = useState<IssuedKey | null>(null);
  const table = useRef<HTMLDivElement>(null);
  const issueForm = useRef<HTMLFormElement>(null);
  const issue = useAction(issueForm);
  const [keyName, setKeyName] = useState('');

  /** After the table re-renders, the focus goes to a row's first button. */
  const focusRow = (keyId: string) => setTimeout(() => table.current?.querySelector<HTMLElement>(`tr[data-key-id="${CSS.escape(keyId)}"] button`)?.focus(), 0);

  const revoke = async (k: KeyRow) => {
    const answer = await confirmAction({
      title: `Revoke key ${k.name}?`,
      body: [
        `The key ${k.masked} of ${accountId} stops working at once, in every gateway process: its next request is a 401. This cannot be undone; issue a new key instead.`,
      ],
      confirmLabel: 'Revoke key',
      danger: true,
      reason: { label: 'Reason', required: false },
    });
    if (!answer.confirmed) {
      announce('Nothing was revoked.');
      return;
    }
    try {
      setProblem(null);
      await admin(`keys/${enc(k.key_id)}/revoke`, { method: 'POST', body: { reason: answer.reason } });
      await load();
      setDone(`Key ${k.name} (${k.masked}) is revoked.`);
      document.getElementById('key-name')?.focus();
    } catch (err) {
      setProblem(err);
    }
  };

  const submitIssue = async (ev: Event) => {
    ev.preventDefault();
    const name = keyName.trim() || 'default';
    const res = await issue.run(() => admin<{ key: string; masked: string }>(`accounts/${enc(accountId)}/keys`, { method: 'POST', body: { name } }));
    if (!res) return;
    setDone('');
    setIssued({ ...res, name });
    setKeyName('');
    void load();
  };

  const withControls = (keys ?? []).some((k) => 'spend_limit' in k);
  const head = ['Name', 'Key', 'Status', ...(withControls ? ['Limits'] : []), 'Issued', 'Last used', 'Action'];
  return (
    <section class="card" aria-labelledby="keys-heading">
      <h2 id="keys-heading">API keys</h2>
      <div ref={table} aria-busy={busy ? 'true' : 'false'}>
        {keys ? (
          <DataTable
            caption={`Keys of ${accountId}`}
            tableId="keys-table"
            columns={head}
            empty="No keys yet."
            rows={keys.map((k) => (
              <tr key={k.key_id} data-key-id={k.key_id} data-status={k.status}>
                <th scope="row">{k.name}</th>
                <td>
                  <code class="masked">{k.masked}</code>
                </td>
                <td>
                  <KeyStatus k={k} />
                </td>
                {withControls && <Controls k={k} />}
                <td>{when(k.issued_at)}</td>
                <td>{k.last_used_at ? when(k.last_used_at) : 'Never'}</td>
                <td>
                  {k.status === 'active' ? (
                    <div class="row actions">
                      {withControls && (
                        <button
                          type="button"
                          class="secondary small"
                          aria-label={`Edit the limits of key ${k.name} (${k.masked})`}
                          onClick={() => setEditing(k)}
                        >
                          Limits
                        </button>
                      )}
                      <button type="button" class="secondary small danger-text" aria-label={`Revoke key ${k.name} (${k.masked})`} onClick={() => revoke(k)}>
                        Revoke
                      </button>
                    </div>
                  ) : (
                    <span class="muted">{k.revoked_at ? `Revoked ${when(k.revoked_at)}` : 'Revoked'}</span>
                  )}
                </td>
              </tr>
            ))}
          />
        ) : (
          <Loading text={failed ? 'The keys could not be loaded.' : 'Loading the keys…'} />
        )}
      </div>
      <ProblemRegion problem={problem} onDismiss={() => setProblem(null)} />
      <Result>{done}</Result>
      {editing && (
        <KeyLimitsForm
          key={editing.key_id}
          accountId={accountId}
          k={editing}
          onClose={() => {
            setEditing(null);
            focusRow(editing.key_id);
          }}
          onSaved={async () => {
            setEditing(null);
            // The table is reloaded before the message, so what the message announces is already shown.
            await load();
            setDone(`Limits of key ${editing.name} (${editing.masked}) saved.`);
            focusRow(editing.key_id);
          }}
        />
      )}
      {issued && (
        <NewSecret
          issued={issued}
          onDone={() => {
            setIssued(null);
            setDone(`The key is now shown only masked, as ${issued.masked}. The secret cannot be shown again.`);
            document.getElementById('issue-key')?.focus();
          }}
        />
      )}
      <h3>Issue a key</h3>
      <form ref={issueForm} class="form-grid" noValidate onSubmit={submitIssue}>
        <InputField
          id="key-name"
          label="Key name"
          optional
          type="text"
          name="name"
          maxLength={200}
          placeholder="default"
          value={keyName}
          onValue={(v) => setKeyName(v)}
        />
        <FormActions submit="Issue a key" submitId="issue-key" busy={issue.busy} />
      </form>
      {issue.region()}
    </section>
  );
}
