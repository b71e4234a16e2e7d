// A signed-in person who is a member of no account (removed since): what to do, and Sign out.
import { sessionApi } from '../api/session.ts';
import type { Session } from '../api/types.ts';

export function NoAccount({ session }: { session: Session }) {
  return (
    <main class="shell-main narrow">
      <section class="card">
        <h1>No account</h1>
        <p>
          {session.email} is signed in but is not a member of any account here. Ask an owner of your account to invite this address, or sign in with another
          one.
        </p>
        <button type="button" onClick={() => sessionApi.signOut().finally(() => location.assign('sign-in'))}>
          Sign out
        </button>
      </section>
    </main>
  );
}
