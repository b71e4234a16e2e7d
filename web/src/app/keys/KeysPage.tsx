// The account's keys: create one per application (secret shown once), rotate, revoke with a
// confirmation, each key's spend against its limit. A role that may only read keys sees no
// form or buttons; the server refuses those calls anyway (403).
import { useEffect, useState } from 'preact/hooks';
import { ConfirmDialog } from '../../shared/components/Dialog.tsx';
import { Field, valueOf } from '../../shared/components/Field.tsx';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { MEMBER_ADVICE } from '../api/client.ts';
import { keysApi } from '../api/account.ts';
import type { ApiKey, KeyControls, NewKey } from '../api/types.ts';
import { useShell } from '../shell/context.ts';
import { KeyForm } from './KeyForm.tsx';
import { KeysTable } from './KeysTable.tsx';
import { ManagementKeys } from './ManagementKeys.tsx';
import { SecretDialog } from './SecretDialog.tsx';

const GRACE: Array<[number, string]> = [
  [0, 'at once'],
  [3600, 'in an hour'],
  [86_400, 'in a day'],
];

export function KeysPage() {
  const { account, may } = useShell();
  const api = keysApi(account.account_id);
  const canManage = may('keys.manage');
  const [keys, setKeys] = useState<ApiKey[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [status, setStatus] = useState('');
  const [busy, setBusy] = useState(false);
  const [created, setCreated] = useState<NewKey | null>(null);
  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const [rotating, setRotating] = useState<ApiKey | null>(null);
  const [grace, setGrace] = useState(0);

  const load = () => api.list().then(setKeys, setProblem);
  useEffect(() => {
    load();
  }, [account.account_id]);

  /** Runs an action with the page's busy flag and problem box; true when it worked. */
  async function act(what: () => Promise<void>): Promise<boolean> {
    setBusy(true);
    setProblem(null);
    try {
      await what();
      await load();
      return true;
    } catch (err) {
      setProblem(err);
      return false;
    } finally {
      setBusy(false);
    }
  }
  const create = (c: KeyControls) =>
    act(async () => {
      setCreated({ ...(await api.create(c)), name: c.name });
      setStatus(`The key for ${c.name} was created.`);
    });
  const revoke = (k: ApiKey) =>
    act(async () => {
      setRevoking(null);
      await api.revoke(k.key_id);
      setStatus(`${k.name} was revoked: it stopped working at once.`);
    });
  const rotate = (k: ApiKey) =>
    act(async () => {
      setRotating(null);
      setCreated({ ...(await api.rotate(k.key_id, grace)), name: k.name });
      setStatus(`${k.name} has a new key.`);
    });

  return (
    <>
      <h1>Keys</h1>
      <p class="visually-hidden" role="status" aria-live="polite" id="keys-status">
        {status}
      </p>
      <ProblemRegion id="problem" problem={problem} advice={MEMBER_ADVICE} onDismiss={() => setProblem(null)} />
      {canManage && (
        <section class="card" aria-labelledby="create-key-heading">
          <h2 id="create-key-heading">Create a key</h2>
          <KeyForm busy={busy} onCreate={create} />
        </section>
      )}
      <section class="card" aria-labelledby="keys-heading">
        <h2 id="keys-heading">Your keys</h2>
        <KeysTable keys={keys} canManage={canManage} onRotate={setRotating} onRevoke={setRevoking} />
        {!canManage && <p class="help">Your role ({account.role}) may see the keys but not change them.</p>}
      </section>
      <ManagementKeys accountId={account.account_id} canManage={canManage} onCreated={setCreated} onProblem={setProblem} onStatus={setStatus} />
      <SecretDialog created={created} onDone={() => setCreated(null)} />
      <ConfirmDialog
        id="revoke-key"
        open={!!revoking}
        title={`Revoke ${revoking?.name ?? 'this key'}?`}
        confirm="Revoke"
        danger
        busy={busy}
        onConfirm={() => revoke(revoking!)}
        onClose={() => setRevoking(null)}
      >
        <p>
          Applications using <code>{revoking?.masked}</code> stop working at once, on every gateway. This cannot be undone.
        </p>
      </ConfirmDialog>
      <ConfirmDialog
        id="rotate-key"
        open={!!rotating}
        title={`Rotate ${rotating?.name ?? 'this key'}?`}
        confirm="Rotate"
        busy={busy}
        onConfirm={() => rotate(rotating!)}
        onClose={() => setRotating(null)}
      >
        <p>A new key replaces it, with the same limits and models. Its secret is shown once.</p>
        <Field id="rotate-grace" label="The old key stops working">
          <select id="rotate-grace" value={String(grace)} onChange={(e) => setGrace(Number(valueOf(e)))}>
            {GRACE.map(([s, label]) => (
              <option key={s} value={String(s)}>
                {label}
              </option>
            ))}
          </select>
        </Field>
      </ConfirmDialog>
    </>
  );
}
