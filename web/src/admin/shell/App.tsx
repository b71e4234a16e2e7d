// The console's frame: the skip link, the bar with the sections and who is signed in, the status
// region, the sign-in card or the section the hash names, and the confirmation dialog. Each hash
// change renders its section afresh and moves the focus to its heading.
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ConfirmActionDialog } from '../../shared/components/ConfirmDialog.tsx';
import { ProblemWording } from '../../shared/components/ProblemBox.tsx';
import { ApiProblem } from '../../shared/problem.ts';
import { getActor, getToken, onUnauthorized, setToken } from '../api/client.ts';
import { explainAdmin } from '../api/explain.ts';
import { announce, Announcer } from '../../shared/components/announce.tsx';
import { AccountPage } from '../accounts/AccountPage.tsx';
import { AccountsList } from '../accounts/AccountsList.tsx';
import { ChannelsPage } from '../channels/ChannelsPage.tsx';
import { CorrectionsPage } from '../corrections/CorrectionsPage.tsx';
import { FinancePage } from '../finance/FinancePage.tsx';
import { ModelsPage } from '../models/ModelsPage.tsx';
import { PaymentsPage } from '../payments/PaymentsPage.tsx';
import { PlansPage } from '../plans/PlansPage.tsx';
import { VerifyPage } from '../verify/VerifyPage.tsx';
import { parseHash, SECTIONS, type Route } from './routes.ts';
import { SignIn } from './SignIn.tsx';

function Section({ route }: { route: Route }) {
  if (route.account) return <AccountPage accountId={route.account} />;
  switch (route.section) {
    case 'plans':
      return <PlansPage />;
    case 'models':
      return <ModelsPage />;
    case 'channels':
      return <ChannelsPage />;
    case 'payments':
      return <PaymentsPage />;
    case 'finance':
      return <FinancePage />;
    case 'corrections':
      return <CorrectionsPage />;
    case 'verify':
      return <VerifyPage />;
    default:
      return <AccountsList />;
  }
}

export function App() {
  const [signedIn, setSignedIn] = useState(() => !!getToken());
  const [ended, setEnded] = useState<unknown>(null);
  const [route, setRoute] = useState(() => parseHash(location.hash));
  const [visit, setVisit] = useState(0);
  const focusHeading = useRef(false);
  const focusToken = useRef(false);

  useEffect(() => {
    const onHash = () => {
      focusHeading.current = true;
      setRoute(parseHash(location.hash));
      setVisit((v) => v + 1);
    };
    addEventListener('hashchange', onHash);
    onUnauthorized((problem) => {
      setToken('');
      setEnded(new ApiProblem(401, { message: `Your session ended: ${problem.message}`, code: problem.code ?? undefined }));
      focusToken.current = true;
      setSignedIn(false);
    });
    return () => removeEventListener('hashchange', onHash);
  }, []);

  // In the turn that renders the view (a layout effect): an effect after paint left the focus on
  // the page for a moment, long enough under load for a keyboard user's next Tab to start over.
  useLayoutEffect(() => {
    if (!signedIn) {
      document.title = 'Sign in · Operator console · Tollgate';
      if (focusToken.current) document.getElementById('admin-token')?.focus();
      focusToken.current = false;
      return;
    }
    const heading = document.querySelector<HTMLElement>('#view h1');
    document.title = `${heading?.textContent ?? 'Console'} · Operator console · Tollgate`;
    if (focusHeading.current) heading?.focus();
    focusHeading.current = false;
  }, [signedIn, route, visit]);

  const signedInNow = () => {
    setEnded(null);
    announce('Signed in.');
    if (!location.hash || location.hash === '#') history.replaceState(null, '', '#/accounts');
    focusHeading.current = true;
    setRoute(parseHash(location.hash));
    setVisit((v) => v + 1);
    setSignedIn(true);
  };
  const signOut = () => {
    setToken('');
    setEnded(null);
    focusToken.current = true;
    setSignedIn(false);
    announce('Signed out. The admin token was removed from this tab.');
  };

  // Every problem in the console is worded for the operator.
  return (
    <ProblemWording.Provider value={explainAdmin}>
      <a class="skip-link" href="#main">
        Skip to the content
      </a>
      <header class="topbar">
        <a class="brand" href="admin#/accounts">
          <img src="app/assets/icon.svg" alt="" width={24} height={24} /> Tollgate <span class="brand-tag">Operator</span>
        </a>
        <nav aria-label="Console sections" id="nav" class="console-nav" hidden={!signedIn}>
          {SECTIONS.map((s) => (
            <a key={s.id} href={`#/${s.id}`} data-section={s.id} aria-current={signedIn && route.section === s.id ? 'page' : undefined}>
              {s.label}
            </a>
          ))}
        </nav>
        <div class="session" id="session" hidden={!signedIn}>
          <span class="session-who" id="session-who">
            <span class="session-label">Signed in as </span>
            {getActor() || 'console'}
          </span>
          <button type="button" id="sign-out" class="secondary small" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <Announcer />
      <main id="main" class="console-main" tabIndex={-1}>
        {signedIn ? (
          <div id="view" class="view">
            <Section key={`${route.section}/${route.account ?? ''}/${visit}`} route={route} />
          </div>
        ) : (
          <SignIn ended={ended} onSignedIn={signedInNow} onDismissEnded={() => setEnded(null)} />
        )}
      </main>
      <ConfirmActionDialog />
    </ProblemWording.Provider>
  );
}
