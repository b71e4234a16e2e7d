// The signed-in layout of /app: the brand, the pages this member's role may use, the account
// picker (a person may belong to several), who is signed in and Sign out; the page below it.
import { useState } from 'preact/hooks';
import { NavBar } from '../../shared/components/NavBar.tsx';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { setPref } from '../../shared/storage.ts';
import { MEMBER_ADVICE } from '../api/client.ts';
import { sessionApi } from '../api/session.ts';
import type { Session } from '../api/types.ts';
import { ShellCtx, type ShellContext } from './context.ts';
import type { ShellPage } from './pages.tsx';

export interface ShellProps {
  ctx: ShellContext;
  pages: ShellPage[];
  current: ShellPage;
}

function AccountPicker({ session, current }: { session: Session; current: string }) {
  if (session.accounts.length < 2) return <span class="shell-account">{current}</span>;
  return (
    <label class="shell-account">
      <span class="visually-hidden">Account</span>
      <select
        value={current}
        onChange={(e) => {
          setPref('account', (e.target as HTMLSelectElement).value);
          location.reload();
        }}
      >
        {session.accounts.map((a) => (
          <option key={a.account_id} value={a.account_id}>
            {a.account_id} ({a.role})
          </option>
        ))}
      </select>
    </label>
  );
}

export function Shell({ ctx, pages, current }: ShellProps) {
  const [problem, setProblem] = useState<unknown>(null);
  const signOut = async () => {
    try {
      await sessionApi.signOut();
      location.assign('sign-in');
    } catch (err) {
      setProblem(err);
    }
  };
  const Page = current.Page!;
  return (
    <ShellCtx.Provider value={ctx}>
      <a class="skip-link" href="#page-main">
        Skip to the page
      </a>
      <header class="topbar shell-bar">
        <a class="brand" href="home">
          <img src="assets/icon.svg" alt="" width={24} height={24} /> Tollgate
        </a>
        <NavBar label="Pages" links={pages.map((p) => ({ href: p.href ?? p.path, label: p.label, current: p === current }))} />
        <div class="shell-who">
          <AccountPicker session={ctx.session} current={ctx.account.account_id} />
          <span class="shell-email" title={ctx.session.email}>
            {ctx.session.email} · <span class="role-tag">{ctx.role}</span>
          </span>
          <button type="button" class="secondary small" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <ProblemRegion id="shell-problem" problem={problem} advice={MEMBER_ADVICE} onDismiss={() => setProblem(null)} />
      <main id="page-main" class="shell-main" tabIndex={-1}>
        <Page />
      </main>
    </ShellCtx.Provider>
  );
}
