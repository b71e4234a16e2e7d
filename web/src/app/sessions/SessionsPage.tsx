// The person's open sessions (this one marked): end any other one; Sign out ends this one.
import { useEffect, useState } from 'preact/hooks';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { dateOf } from '../../shared/format.ts';
import { MEMBER_ADVICE } from '../api/client.ts';
import { sessionApi } from '../api/session.ts';
import type { OpenSession } from '../api/types.ts';
import { useShell } from '../shell/context.ts';

const when = (iso: string) => `${dateOf(iso)} ${new Date(iso).toLocaleTimeString('en-US', { hour: '2-digit', minute: '2-digit' })}`;

export function SessionsPage() {
  const { session } = useShell();
  const [rows, setRows] = useState<OpenSession[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [status, setStatus] = useState('');
  const load = () => sessionApi.list().then(setRows, setProblem);
  useEffect(() => {
    load();
  }, []);
  const end = async (s: OpenSession) => {
    setProblem(null);
    try {
      await sessionApi.end(s.session_id);
      setStatus(`The session started ${when(s.started_at)} has ended.`);
      await load();
    } catch (err) {
      setProblem(err);
    }
  };
  return (
    <>
      <h1 id="sessions-heading">Sessions</h1>
      <p class="help">Where {session.email} is signed in. End a session you do not recognise: it stops working at once, on every gateway.</p>
      <p class="visually-hidden" role="status" aria-live="polite">
        {status}
      </p>
      <ProblemRegion id="problem" problem={problem} advice={MEMBER_ADVICE} onDismiss={() => setProblem(null)} />
      <section class="card" aria-labelledby="sessions-heading">
        <DataTable
          id="sessions-table"
          labelledBy="sessions-heading"
          caption="Your open sessions"
          columns={[{ label: 'Signed in' }, { label: 'By' }, { label: 'Expires' }, { label: '' }]}
          empty={rows ? 'No open sessions.' : 'Loading…'}
          rows={(rows ?? []).map((s) => (
            <tr key={s.session_id}>
              <td>{when(s.started_at)}</td>
              <td>{s.method === 'oidc' ? 'OpenID Connect' : 'email link'}</td>
              <td>{when(s.expires_at)}</td>
              <td class="actions">
                {s.current ? (
                  <span class="role-tag">this session</span>
                ) : (
                  <button type="button" class="secondary small" onClick={() => end(s)} aria-label={`End the session started ${when(s.started_at)}`}>
                    End
                  </button>
                )}
              </td>
            </tr>
          ))}
        />
      </section>
    </>
  );
}
