// Accounts: every account with its plan and balance, 25 a page (the cursors of the pages seen are
// kept while the operator looks at other sections), and the form that opens one.
import { useEffect, useRef, useState } from 'preact/hooks';
import { admin, enc } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { InputField } from '../../shared/components/Field.tsx';
import { Heading, Loading, Pill, Result } from '../../shared/components/Page.tsx';
import { DataTable, Num } from '../../shared/components/DataTable.tsx';
import { fmt, when } from '../../shared/format.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { useAction } from '../../shared/useAction.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import type { AccountSummary, List } from '../api/types.ts';

const PAGE_SIZE = 25;
/** Page n starts after cursors[n] (undefined: the first page). */
const pages: { cursors: Array<string | undefined>; index: number } = { cursors: [undefined], index: 0 };

export const STATUS_TEXT: Record<string, string> = { active: 'Active', expired: 'Expired', no_plan: 'No plan' };
export const StatusPill = ({ status }: { status: string }) => <Pill state={status} text={STATUS_TEXT[status] ?? status} />;

export function AccountsList() {
  const [page, setPage] = useState<List<AccountSummary> | null>(null);
  const [index, setIndex] = useState(pages.index);
  const [busy, setBusy] = useState(true);
  const [problem, setProblem] = useState<unknown>(null);
  const [failed, setFailed] = useState(false);

  const load = async (at = index) => {
    setBusy(true);
    setProblem(null);
    try {
      const after = pages.cursors[at];
      const p = await admin<List<AccountSummary>>(`accounts?limit=${PAGE_SIZE}${after ? `&after=${enc(after)}` : ''}`);
      if (p.next_after) pages.cursors[at + 1] = p.next_after;
      setPage(p);
      setFailed(false);
    } catch (err) {
      setFailed(true);
      setProblem(err);
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => void load(), []);
  const go = (to: number) => {
    pages.index = to;
    setIndex(to);
    void load(to);
  };

  const data = page?.data ?? [];
  return (
    <>
      <Heading text="Accounts" intro="Every account with its plan and balance. Open one to manage its keys, plan, extra tokens and statements." />
      <ProblemRegion problem={problem} onDismiss={() => setProblem(null)} />
      <section class="card" aria-labelledby="accounts-list-heading">
        <div class="card-head">
          <h2 id="accounts-list-heading">All accounts</h2>
          <button type="button" class="secondary small" onClick={() => load()}>
            Refresh
          </button>
        </div>
        <div class="list-body" aria-busy={busy ? 'true' : 'false'}>
          {failed ? (
            <Loading text="The accounts could not be loaded." />
          ) : !page ? (
            <Loading text="Loading the accounts…" />
          ) : (
            <DataTable
              caption="Accounts"
              tableId="accounts-table"
              columns={['Account', '#Remaining tokens', 'Status', 'Plan', '#Main quota left', '#Extra tokens left', 'Plan expires']}
              empty="No accounts yet: open one below."
              rows={data.map((a) => (
                <tr key={a.account_id} data-account-id={a.account_id}>
                  <th scope="row">
                    <a href={`#/accounts/${enc(a.account_id)}`}>{a.name}</a>
                    <span class="sub">{a.account_id}</span>
                  </th>
                  <Num value={a.remaining_tokens} data-field="remaining_tokens" />
                  <td>
                    <StatusPill status={a.status} />
                  </td>
                  <td>{a.plan ? a.plan.name : '—'}</td>
                  <td class="num">{a.plan ? `${fmt(a.quota.remaining)} of ${fmt(a.quota.total)}` : '—'}</td>
                  <Num value={a.extra_tokens.remaining} />
                  <td>{when(a.expires_at)}</td>
                </tr>
              ))}
            />
          )}
        </div>
        <div class="row pager">
          <button type="button" class="secondary small" disabled={index === 0} onClick={() => go(Math.max(0, index - 1))}>
            Previous page
          </button>
          <span class="muted" aria-live="polite">
            {page ? `Page ${index + 1}${data.length ? `: ${data[0].account_id} to ${data[data.length - 1].account_id}` : ''}` : ''}
          </span>
          <button type="button" class="secondary small" disabled={!page?.has_more} onClick={() => go(index + 1)}>
            Next page
          </button>
        </div>
      </section>
      <OpenAccount onOpened={() => load()} />
    </>
  );
}

function OpenAccount({ onOpened }: { onOpened: () => void }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const [name, setName] = useState('');
  const [id, setId] = useState('');
  const [opened, setOpened] = useState<string | null>(null);
  const submit = async (ev: Event) => {
    ev.preventDefault();
    setOpened(null);
    const res = await action.run(async () => {
      if (!name.trim()) throw clientProblem('Give the account a name.', 'name');
      return admin<{ account_id: string }>('accounts', { method: 'POST', body: { name: name.trim(), ...(id.trim() ? { account_id: id.trim() } : {}) } });
    });
    if (!res) return;
    setOpened(res.account_id);
    setName('');
    setId('');
    onOpened();
  };
  return (
    <section class="card" aria-labelledby="open-account-heading">
      <h2 id="open-account-heading">Open an account</h2>
      <form ref={form} class="form-grid" noValidate onSubmit={submit}>
        <InputField id="open-name" label="Name" type="text" name="name" required maxLength={200} value={name} onValue={(v) => setName(v)} />
        <InputField
          id="open-id"
          label="Account id"
          optional
          help="Letters, digits, _ . : -; left empty, one is generated."
          type="text"
          name="account_id"
          maxLength={64}
          value={id}
          onValue={(v) => setId(v)}
        />
        <FormActions submit="Open account" busy={action.busy} />
      </form>
      {action.region()}
      <Result>
        {opened && (
          <>
            Opened account <a href={`#/accounts/${enc(opened)}`}>{opened}</a>. Subscribe it to a plan and issue a key on its page.
          </>
        )}
      </Result>
    </section>
  );
}
