// Entry of the /app shell's bundle (app.js): the sign-in page, or the session read from GET
// /app/api/session and the page of the path inside the signed-in layout. Without a session the
// browser goes to the sign-in page (and comes back after it).
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { ApiProblem } from '../../shared/problem.ts';
import { getPref } from '../../shared/storage.ts';
import { MEMBER_ADVICE } from '../api/client.ts';
import { sessionApi } from '../api/session.ts';
import type { Session } from '../api/types.ts';
import { SignInPage } from '../sign-in/SignInPage.tsx';
import { NoAccount } from './NoAccount.tsx';
import { shellContext } from './context.ts';
import { SHELL_PAGES } from './pages.tsx';
import { Shell } from './Shell.tsx';

const pageName = () => /\/app\/([a-z-]+)$/.exec(location.pathname)?.[1] ?? 'home';

function SignedIn({ name }: { name: string }) {
  const [session, setSession] = useState<Session | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [reads, setReads] = useState(0);
  useEffect(() => {
    sessionApi.read().then(setSession, (err) => {
      if (err instanceof ApiProblem && err.status === 401) location.replace(`sign-in?next=${encodeURIComponent(name)}`);
      else setProblem(err);
    });
  }, [reads]);
  if (!session)
    return (
      <main class="shell-main">
        <p class="muted" role="status">
          {problem ? '' : 'Loading your account…'}
        </p>
        <ProblemRegion id="problem" problem={problem} advice={MEMBER_ADVICE} onDismiss={() => setReads((n) => n + 1)} />
      </main>
    );
  const wanted = new URLSearchParams(location.search).get('account') ?? getPref('account', '');
  const account = session.accounts.find((a) => a.account_id === wanted) ?? session.accounts[0];
  if (!account) return <NoAccount session={session} />;
  const ctx = shellContext(session, account, () => setReads((n) => n + 1));
  const pages = SHELL_PAGES.filter((p) => p.needs === null || ctx.may(p.needs));
  let current = pages.find((p) => p.path === name && p.Page);
  if (!current) {
    // /app, or a page this role may not use: the first page it may.
    current = pages.find((p) => p.Page)!;
    history.replaceState(null, '', current.path + location.search);
  }
  return <Shell ctx={ctx} pages={pages} current={current} />;
}

const name = pageName();
render(name === 'sign-in' ? <SignInPage /> : <SignedIn name={name} />, document.getElementById('page')!);
