// The sign-in card: the admin token (checked with one call before it is kept in this tab's
// sessionStorage) and, optionally, the operator's name recorded as the actor of every change.
import { useRef, useState } from 'preact/hooks';
import { ApiProblem, clientProblem } from '../../shared/problem.ts';
import { ACTOR_PATTERN, admin, getActor, setActor, setToken } from '../api/client.ts';
import { markInvalid, useAction } from '../../shared/useAction.tsx';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';

export function SignIn({ ended, onSignedIn, onDismissEnded }: { ended: unknown; onSignedIn: () => void; onDismissEnded: () => void }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const [token, setTokenText] = useState('');
  const [actor, setActorText] = useState(getActor() && getActor() !== 'console' ? getActor() : '');
  const shown = action.problem ?? ended;

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const t = token.trim();
    const a = actor.trim();
    const ok = await action.run(async () => {
      if (!t) throw clientProblem('Enter the admin token.', 'admin-token');
      if (a && !ACTOR_PATTERN.test(a)) throw clientProblem('Your name may have 1 to 64 letters, digits, “_”, “.”, “@” or “-”.', 'actor');
      try {
        await admin('accounts?limit=1', { token: t });
      } catch (err) {
        // Without an admin token configured the gateway serves no /admin/v1 at all.
        if (err instanceof ApiProblem && err.status === 404)
          throw new ApiProblem(404, {
            message: 'This gateway has no admin API: it was started without an admin token (set TOLLGATE_ADMIN_TOKEN, or give it a data directory).',
            code: 'admin_api_disabled',
          });
        throw err;
      }
      return true;
    });
    if (!ok) {
      const input = form.current?.querySelector<HTMLInputElement>('#admin-token');
      if (input && !form.current?.querySelector('[aria-invalid="true"]')) markInvalid(form.current, 'admin-token');
      input?.select();
      return;
    }
    setToken(t);
    setActor(a || 'console');
    setTokenText('');
    onSignedIn();
  };

  return (
    <section id="signin" class="signin card" aria-labelledby="signin-heading">
      <h1 id="signin-heading" tabIndex={-1}>
        Operator console
      </h1>
      <p class="muted">Accounts, keys, plans, prices, payments, finance, channels, corrections and the ledger audit of this gateway.</p>
      <form ref={form} class="stack" noValidate onSubmit={submit}>
        <div class="field">
          <label for="admin-token">Admin token</label>
          <input
            id="admin-token"
            name="admin-token"
            type="password"
            autocomplete="off"
            spellcheck={false}
            autocapitalize="off"
            placeholder="tg_admin_…"
            aria-describedby="admin-token-help"
            required
            value={token}
            onInput={(e) => setTokenText((e.target as HTMLInputElement).value)}
          />
          <p id="admin-token-help" class="help">
            Printed once on the gateway’s first start and kept in <code>&lt;data dir&gt;/admin-token</code>, or the value of <code>TOLLGATE_ADMIN_TOKEN</code>.
            Kept only in this browser tab (sessionStorage) and sent only to this gateway’s <code>/admin/v1</code> API.
          </p>
        </div>
        <div class="field">
          <label for="actor">
            Your name <span class="optional">(optional)</span>
          </label>
          <input
            id="actor"
            name="actor"
            type="text"
            autocomplete="off"
            spellcheck={false}
            autocapitalize="off"
            maxLength={64}
            placeholder="console"
            aria-describedby="actor-help"
            value={actor}
            onInput={(e) => setActorText((e.target as HTMLInputElement).value)}
          />
          <p id="actor-help" class="help">
            Recorded as the actor of every change you make (letters, digits, <code>_ . @ -</code>).
          </p>
        </div>
        <div class="row">
          <button type="submit" id="signin-submit" disabled={action.busy} aria-busy={action.busy ? 'true' : undefined}>
            Sign in
          </button>
        </div>
      </form>
      <ProblemRegion id="signin-problem" problem={shown} onDismiss={() => (action.setProblem(null), onDismissEnded())} />
    </section>
  );
}
