// The account's members: invite (an address and a role), change a role, remove, and the history
// of every change with its actor. A role that may not manage members sees the list and history
// only; the server refuses the rest anyway (403).
import { useEffect, useState } from 'preact/hooks';
import { ConfirmDialog } from '../../shared/components/Dialog.tsx';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { Field, valueOf } from '../../shared/components/Field.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { ROLES } from '../../../../src/ledger/roles.ts';
import { MEMBER_ADVICE } from '../api/client.ts';
import { membersApi } from '../api/account.ts';
import type { Member, MemberEvent, Role } from '../api/types.ts';
import { useShell } from '../shell/context.ts';
import { MemberHistory } from './MemberHistory.tsx';

function RoleSelect({ id, value, onChange }: { id: string; value: Role; onChange: (r: Role) => void }) {
  return (
    <select id={id} value={value} onChange={(e) => onChange(valueOf(e) as Role)}>
      {ROLES.map((r) => (
        <option key={r} value={r}>
          {r}
        </option>
      ))}
    </select>
  );
}

export function MembersPage() {
  const { account, may, session, reload } = useShell();
  const api = membersApi(account.account_id);
  const canManage = may('members.manage');
  const [data, setData] = useState<{ members: Member[]; events: MemberEvent[] } | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [status, setStatus] = useState('');
  const [busy, setBusy] = useState(false);
  const [invite, setInvite] = useState<{ email: string; role: Role }>({ email: '', role: 'developer' });
  const [editing, setEditing] = useState<{ member: Member; role: Role } | null>(null);
  const [removing, setRemoving] = useState<Member | null>(null);

  const load = () => api.list().then(setData, setProblem);
  useEffect(() => {
    load();
  }, [account.account_id]);

  async function act(what: () => Promise<string>, self = false) {
    setBusy(true);
    setProblem(null);
    try {
      setStatus(await what());
      // A change to one's own membership changes what the shell shows.
      if (self) reload();
      else await load();
    } catch (err) {
      setProblem(err);
    } finally {
      setBusy(false);
    }
  }
  const isSelf = (m: Member) => m.email === session.email;
  const sendInvite = (e: Event) => {
    e.preventDefault();
    act(async () => {
      const m = await api.invite(invite.email.trim(), invite.role);
      setInvite({ email: '', role: invite.role });
      return `${m.email} is invited as ${m.role}: they join when they first sign in.`;
    });
  };

  return (
    <>
      <h1>Members</h1>
      <p class="visually-hidden" role="status" aria-live="polite" id="members-status">
        {status}
      </p>
      <ProblemRegion id="problem" problem={problem} advice={MEMBER_ADVICE} onDismiss={() => setProblem(null)} />
      {canManage && (
        <section class="card" aria-labelledby="invite-heading">
          <h2 id="invite-heading">Invite a member</h2>
          <form class="form-grid" onSubmit={sendInvite}>
            <Field id="invite-email" label="Email address">
              <input
                type="email"
                id="invite-email"
                required
                maxLength={254}
                value={invite.email}
                onInput={(e) => setInvite({ ...invite, email: valueOf(e) })}
              />
            </Field>
            <Field id="invite-role" label="Role">
              <RoleSelect id="invite-role" value={invite.role} onChange={(role) => setInvite({ ...invite, role })} />
            </Field>
            <FormActions submit="Invite" busy={busy} />
          </form>
        </section>
      )}
      <section class="card" aria-labelledby="members-heading">
        <h2 id="members-heading">Members</h2>
        <DataTable
          id="members-table"
          labelledBy="members-heading"
          caption="The account's members"
          columns={[{ label: 'Address' }, { label: 'Role' }, { label: 'State' }, ...(canManage ? [{ label: 'Actions' }] : [])]}
          empty={data ? 'No members.' : 'Loading…'}
          rows={(data?.members ?? [])
            .filter((m) => m.status !== 'removed')
            .map((m) => (
              <tr key={m.member_id} data-email={m.email}>
                <td>
                  {m.email} {isSelf(m) && <span class="muted">(you)</span>}
                </td>
                <td>
                  <span class="role-tag">{m.role}</span>
                </td>
                <td>{m.status === 'invited' ? 'invited, not signed in yet' : m.status}</td>
                {canManage && (
                  <td class="actions">
                    <div class="row">
                      <button
                        type="button"
                        class="secondary small"
                        aria-label={`Change the role of ${m.email}`}
                        onClick={() => setEditing({ member: m, role: m.role })}
                      >
                        Change role
                      </button>
                      <button type="button" class="secondary small" aria-label={`Remove ${m.email}`} onClick={() => setRemoving(m)}>
                        Remove
                      </button>
                    </div>
                  </td>
                )}
              </tr>
            ))}
        />
      </section>
      <section class="card" aria-labelledby="history-heading">
        <h2 id="history-heading">History</h2>
        <MemberHistory events={data?.events ?? null} />
      </section>
      <ConfirmDialog
        id="change-role"
        open={!!editing}
        title={`Change the role of ${editing?.member.email ?? ''}`}
        confirm="Save role"
        busy={busy}
        onClose={() => setEditing(null)}
        onConfirm={() => {
          const { member, role } = editing!;
          setEditing(null);
          act(async () => `${member.email} is now ${(await api.changeRole(member.member_id, role)).role}.`, isSelf(member));
        }}
      >
        <Field id="change-role-select" label="New role">
          <RoleSelect id="change-role-select" value={editing?.role ?? 'developer'} onChange={(role) => setEditing(editing && { ...editing, role })} />
        </Field>
      </ConfirmDialog>
      <ConfirmDialog
        id="remove-member"
        open={!!removing}
        title={`Remove ${removing?.email ?? ''}?`}
        confirm="Remove"
        danger
        busy={busy}
        onClose={() => setRemoving(null)}
        onConfirm={() => {
          const m = removing!;
          setRemoving(null);
          act(async () => {
            await api.remove(m.member_id);
            return `${m.email} was removed.`;
          }, isSelf(m));
        }}
      >
        <p>They lose access to this account at once. Their keys stay until revoked.</p>
      </ConfirmDialog>
    </>
  );
}
